{{/* Names and labels. */}}
{{- define "react-mem.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 32 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 32 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "react-mem.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: react-mem
{{- end -}}

{{/* Selector labels of one processor: (dict "root" $ "name" "agent-mem"). */}}
{{- define "react-mem.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "react-mem.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "react-mem.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "react-mem.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding the agent's memory-state key: the named one, else the chart's. */}}
{{- define "react-mem.memoryStateKeySecret" -}}
{{- .Values.memoryStateKeySecret.name | default (printf "%s-memory-state-key" (include "react-mem.fullname" .)) -}}
{{- end -}}

{{- define "react-mem.secretName" -}}
{{- printf "%s-credentials" (include "react-mem.fullname" .) -}}
{{- end -}}

{{/*
An env var from a Secret: (dict "root" $ "env" "PULSAR_API_KEY" "ref" .Values.pulsar.apiKeySecret
"created" "pulsarApiKey"). An existing Secret wins; else the chart's own Secret when
createSecret is on and holds a value for it; else nothing.
*/}}
{{- define "react-mem.secretEnv" -}}
{{- $root := .root -}}
{{- if .ref.name }}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ .ref.name }}
      key: {{ .ref.key }}
{{- else if and $root.Values.createSecret.enabled (index $root.Values.createSecret .created) }}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "react-mem.secretName" $root }}
      key: {{ .created }}
{{- end }}
{{- end -}}

{{/* Processors that keep state on a volume (those whose vector store is Qdrant,
react-mem.storeProcessors, are in _flows.tpl, generated from the topology description). */}}
{{- define "react-mem.statefulProcessors" -}}
memory-learner config-service
{{- end -}}

{{- define "react-mem.enabled" -}}
{{- $p := index .root.Values.processors .name -}}
{{- if and $p $p.enabled }}true{{ end -}}
{{- end -}}

{{/* Checks that stop a broken configuration at render time. */}}
{{- define "react-mem.validate" -}}
{{- $v := .Values -}}
{{- if not (has $v.flows.source (list "file" "config-service")) }}
{{- fail (printf "flows.source must be file or config-service, not %q" $v.flows.source) }}
{{- end }}
{{- if not (has $v.bus (list "pulsar" "rabbitmq")) }}
{{- fail (printf "bus must be pulsar or rabbitmq, not %q" $v.bus) }}
{{- end }}
{{- if and (eq $v.bus "pulsar") (not $v.pulsar.url) }}
{{- fail "pulsar.url is required: the processors need an existing Pulsar" }}
{{- end }}
{{- if and (eq $v.bus "rabbitmq") (not $v.rabbitmq.host) }}
{{- fail "rabbitmq.host is required with bus: rabbitmq: the processors need an existing RabbitMQ" }}
{{- end }}
{{- range $name := splitList " " (include "react-mem.storeProcessors" .) }}
{{- if and (include "react-mem.enabled" (dict "root" $ "name" $name)) (not $v.qdrant.url) }}
{{- fail (printf "qdrant.url is required by %s (memory services use a Qdrant server here)" $name) }}
{{- end }}
{{- end }}
{{- $cs := index $v.processors "config-service" }}
{{- if and $cs.enabled (gt (int $cs.replicas) 1) }}
{{- fail "processors.config-service.replicas must be 1: its store is a file" }}
{{- end }}
{{- if and (eq $v.flows.source "file") (include "react-mem.enabled" (dict "root" $ "name" "memory-learner")) }}
{{- range $needed := list "fact-memory" "episode-memory" "conversation-memory" }}
{{- if not (include "react-mem.enabled" (dict "root" $ "name" $needed)) }}
{{- fail (printf "memory-learner writes through %s: enable it, or disable the learner" $needed) }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The bus's environment (Pulsar or RabbitMQ, credentials from Secrets): every processor's
and the inspector's. Called with the root context. */}}
{{- define "react-mem.busEnv" -}}
{{- $root := . -}}
{{- $tls := .Values.pulsar.tls -}}
{{- if eq $root.Values.bus "rabbitmq" }}
{{- $mq := $root.Values.rabbitmq }}
- name: PUBSUB_BACKEND
  value: rabbitmq
- name: RABBITMQ_HOST
  value: {{ $mq.host | quote }}
- name: RABBITMQ_PORT
  value: {{ $mq.port | quote }}
- name: RABBITMQ_VHOST
  value: {{ $mq.vhost | quote }}
- name: RABBITMQ_USERNAME
  value: {{ $mq.username | quote }}
{{- with $mq.passwordSecret.name }}
- name: RABBITMQ_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $mq.passwordSecret.key | quote }}
{{- end }}
{{- else }}
- name: PULSAR_HOST
  value: {{ $root.Values.pulsar.url | quote }}
{{- with $root.Values.pulsar.listener }}
- name: PULSAR_LISTENER
  value: {{ . | quote }}
{{- end }}
{{- with include "react-mem.secretEnv" (dict "root" $root "env" "PULSAR_API_KEY" "ref" $root.Values.pulsar.apiKeySecret "created" "pulsarApiKey") }}{{ . | trim | nindent 0 }}{{ end }}
{{- with $tls.trustCertsSecret.name }}
- name: PULSAR_TLS_TRUST_CERTS_FILE
  value: {{ printf "/etc/pulsar-tls/ca/%s" $tls.trustCertsSecret.key | quote }}
{{- end }}
- name: PULSAR_TLS_VALIDATE_HOSTNAME
  value: {{ $tls.validateHostname | toString | quote }}
{{- if $tls.clientCertSecret }}
- name: PULSAR_TLS_CERT_FILE
  value: /etc/pulsar-tls/client/tls.crt
- name: PULSAR_TLS_KEY_FILE
  value: /etc/pulsar-tls/client/tls.key
{{- end }}
{{- end }}
{{- end -}}
