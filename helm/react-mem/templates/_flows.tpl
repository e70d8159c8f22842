{{/*
The flow file: {workspace: {config-type: {key: value}}}, what `react-mem run --flows` and the
config service's seed read. Each enabled processor gets `processor:<id>` with one entry per
flow, mapping its spec names to queues (TrustGraph's request:tg:<service>:<workspace>:<flow>
naming); the agent's optional clients are wired only to services that run.
*/}}
{{- define "react-mem.flowFile" -}}
{{- $v := .Values -}}
{{- $ws := $v.flows.workspace -}}
{{- $on := dict -}}
{{- range $name, $p := $v.processors }}{{ if $p.enabled }}{{ $_ := set $on $name true }}{{ end }}{{ end -}}
{{- $agentMem := dict -}}
{{- range $k, $val := $v.agentMem }}{{ $_ := set $agentMem $k (toString $val) }}{{ end -}}
{{- $tools := dict -}}
{{- range $k, $val := $v.tools }}{{ $_ := set $tools $k (ternary $val (toJson $val) (kindIs "string" $val)) }}{{ end -}}
{{- $config := dict "agent-mem" $agentMem "tool" $tools -}}
{{- range $flow := $v.flows.names -}}
{{- $s := printf "%s:%s" $ws $flow -}}
{{- $client := dict -}}
{{- range $svc := list "text-completion" "fact-memory" "episode-memory" "conversation-memory" "working-memory" "playbook-memory" -}}
{{- $_ := set $client $svc (dict (printf "%s-request" $svc) (printf "request:tg:%s:%s" $svc $s) (printf "%s-response" $svc) (printf "response:tg:%s:%s" $svc $s)) -}}
{{- end -}}
{{- $trajectory := printf "flow:tg:agent-trajectory:%s" $s -}}
{{- $ended := printf "flow:tg:conversation-ended:%s" $s -}}
{{- $audit := printf "flow:tg:memory-audit:%s" $s -}}
{{- $topics := dict -}}
{{- if hasKey $on "agent-mem" -}}
{{- $t := dict "request" (printf "request:tg:agent:%s" $s) "next" (printf "request:tg:agent:%s" $s) "response" (printf "response:tg:agent:%s" $s) -}}
{{- $t = merge $t (index $client "text-completion") -}}
{{- range $svc := list "fact-memory" "episode-memory" "conversation-memory" "working-memory" "playbook-memory" -}}
{{- if hasKey $on $svc }}{{ $t = merge $t (index $client $svc) }}{{ end -}}
{{- end -}}
{{- if hasKey $on "memory-learner" }}{{ $_ := set $t "trajectory" $trajectory }}{{ end -}}
{{- $_ := set $topics "agent-mem" $t -}}
{{- end -}}
{{- if hasKey $on "memory-learner" -}}
{{- $t := dict "trajectory" $trajectory "conversation-ended" $ended "audit" $audit -}}
{{- $_ := set $t "memory-forget" (printf "flow:tg:memory-forget:%s" $s) -}}
{{- $_ := set $t "memory-forget-response" (printf "response:tg:memory-forget:%s" $s) -}}
{{- range $svc := list "text-completion" "fact-memory" "episode-memory" "conversation-memory" -}}
{{- $t = merge $t (index $client $svc) -}}
{{- end -}}
{{- if hasKey $on "playbook-memory" -}}
{{- $t = merge $t (index $client "playbook-memory") -}}
{{- $_ := set $t "feedback" (printf "flow:tg:agent-feedback:%s" $s) -}}
{{- end -}}
{{- $_ := set $topics "memory-learner" $t -}}
{{- end -}}
{{- range $svc := list "text-completion" "fact-memory" "episode-memory" "conversation-memory" "working-memory" "playbook-memory" -}}
{{- if hasKey $on $svc -}}
{{- $t := dict "request" (printf "request:tg:%s:%s" $svc $s) "response" (printf "response:tg:%s:%s" $svc $s) -}}
{{- if eq $svc "conversation-memory" }}{{ $_ := set $t "ended" $ended }}{{ end -}}
{{- if has $svc (list "fact-memory" "episode-memory" "conversation-memory" "playbook-memory") }}{{ $_ := set $t "audit" $audit }}{{ end -}}
{{- if eq $svc "working-memory" }}{{ $t = merge $t (index $client "text-completion") }}{{ end -}}
{{- $_ := set $topics $svc $t -}}
{{- end -}}
{{- end -}}
{{- range $name, $t := $topics -}}
{{- $key := printf "processor:%s" (index $v.processors $name).id -}}
{{- $entries := default (dict) (index $config $key) -}}
{{- $_ := set $entries $flow (dict "topics" $t "parameters" (dict)) -}}
{{- $_ := set $config $key $entries -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict $ws $config) -}}
{{- end -}}
