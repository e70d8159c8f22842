{{/*
The flow file: {workspace: {config-type: {key: value}}}, what `react-mem run --flows` and the
config service's seed read. Each enabled processor gets `processor:<id>` with one entry per
flow, mapping its spec names to queues (TrustGraph's request:tg:<service>:<workspace>:<flow>
naming); the agent's optional clients are wired only to services that run.
Generated from devtools/topology.py (`--write`): edit that, not this file.
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
{{- $topics := dict -}}
{{- if hasKey $on "agent-mem" -}}
{{- $t := dict -}}
{{- $_ := set $t "request" (printf "request:tg:agent:%s" $s) -}}
{{- $_ := set $t "next" (printf "request:tg:agent:%s" $s) -}}
{{- $_ := set $t "response" (printf "response:tg:agent:%s" $s) -}}
{{- $_ := set $t "text-completion-request" (printf "request:tg:text-completion:%s" $s) -}}
{{- $_ := set $t "text-completion-response" (printf "response:tg:text-completion:%s" $s) -}}
{{- if hasKey $on "fact-memory" }}{{ $_ := set $t "fact-memory-request" (printf "request:tg:fact-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "fact-memory" }}{{ $_ := set $t "fact-memory-response" (printf "response:tg:fact-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "episode-memory" }}{{ $_ := set $t "episode-memory-request" (printf "request:tg:episode-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "episode-memory" }}{{ $_ := set $t "episode-memory-response" (printf "response:tg:episode-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "conversation-memory" }}{{ $_ := set $t "conversation-memory-request" (printf "request:tg:conversation-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "conversation-memory" }}{{ $_ := set $t "conversation-memory-response" (printf "response:tg:conversation-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "playbook-memory" }}{{ $_ := set $t "playbook-memory-request" (printf "request:tg:playbook-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "playbook-memory" }}{{ $_ := set $t "playbook-memory-response" (printf "response:tg:playbook-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "working-memory" }}{{ $_ := set $t "working-memory-request" (printf "request:tg:working-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "working-memory" }}{{ $_ := set $t "working-memory-response" (printf "response:tg:working-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "memory-learner" }}{{ $_ := set $t "trajectory" (printf "flow:tg:agent-trajectory:%s" $s) }}{{ end -}}
{{- $_ := set $topics "agent-mem" $t -}}
{{- end -}}
{{- if hasKey $on "memory-learner" -}}
{{- $t := dict -}}
{{- $_ := set $t "trajectory" (printf "flow:tg:agent-trajectory:%s" $s) -}}
{{- $_ := set $t "conversation-ended" (printf "flow:tg:conversation-ended:%s" $s) -}}
{{- $_ := set $t "audit" (printf "flow:tg:memory-audit:%s" $s) -}}
{{- if hasKey $on "playbook-memory" }}{{ $_ := set $t "feedback" (printf "flow:tg:agent-feedback:%s" $s) }}{{ end -}}
{{- $_ := set $t "memory-forget" (printf "flow:tg:memory-forget:%s" $s) -}}
{{- $_ := set $t "memory-forget-response" (printf "response:tg:memory-forget:%s" $s) -}}
{{- if hasKey $on "playbook-memory" }}{{ $_ := set $t "playbook-memory-request" (printf "request:tg:playbook-memory:%s" $s) }}{{ end -}}
{{- if hasKey $on "playbook-memory" }}{{ $_ := set $t "playbook-memory-response" (printf "response:tg:playbook-memory:%s" $s) }}{{ end -}}
{{- $_ := set $t "text-completion-request" (printf "request:tg:text-completion:%s" $s) -}}
{{- $_ := set $t "text-completion-response" (printf "response:tg:text-completion:%s" $s) -}}
{{- $_ := set $t "fact-memory-request" (printf "request:tg:fact-memory:%s" $s) -}}
{{- $_ := set $t "fact-memory-response" (printf "response:tg:fact-memory:%s" $s) -}}
{{- $_ := set $t "episode-memory-request" (printf "request:tg:episode-memory:%s" $s) -}}
{{- $_ := set $t "episode-memory-response" (printf "response:tg:episode-memory:%s" $s) -}}
{{- $_ := set $t "conversation-memory-request" (printf "request:tg:conversation-memory:%s" $s) -}}
{{- $_ := set $t "conversation-memory-response" (printf "response:tg:conversation-memory:%s" $s) -}}
{{- $_ := set $topics "memory-learner" $t -}}
{{- end -}}
{{- if hasKey $on "text-completion" -}}
{{- $t := dict -}}
{{- $_ := set $t "request" (printf "request:tg:text-completion:%s" $s) -}}
{{- $_ := set $t "response" (printf "response:tg:text-completion:%s" $s) -}}
{{- $_ := set $topics "text-completion" $t -}}
{{- end -}}
{{- if hasKey $on "fact-memory" -}}
{{- $t := dict -}}
{{- $_ := set $t "request" (printf "request:tg:fact-memory:%s" $s) -}}
{{- $_ := set $t "response" (printf "response:tg:fact-memory:%s" $s) -}}
{{- $_ := set $t "audit" (printf "flow:tg:memory-audit:%s" $s) -}}
{{- $_ := set $topics "fact-memory" $t -}}
{{- end -}}
{{- if hasKey $on "episode-memory" -}}
{{- $t := dict -}}
{{- $_ := set $t "request" (printf "request:tg:episode-memory:%s" $s) -}}
{{- $_ := set $t "response" (printf "response:tg:episode-memory:%s" $s) -}}
{{- $_ := set $t "audit" (printf "flow:tg:memory-audit:%s" $s) -}}
{{- $_ := set $topics "episode-memory" $t -}}
{{- end -}}
{{- if hasKey $on "conversation-memory" -}}
{{- $t := dict -}}
{{- $_ := set $t "request" (printf "request:tg:conversation-memory:%s" $s) -}}
{{- $_ := set $t "response" (printf "response:tg:conversation-memory:%s" $s) -}}
{{- $_ := set $t "audit" (printf "flow:tg:memory-audit:%s" $s) -}}
{{- $_ := set $t "ended" (printf "flow:tg:conversation-ended:%s" $s) -}}
{{- $_ := set $topics "conversation-memory" $t -}}
{{- end -}}
{{- if hasKey $on "playbook-memory" -}}
{{- $t := dict -}}
{{- $_ := set $t "request" (printf "request:tg:playbook-memory:%s" $s) -}}
{{- $_ := set $t "response" (printf "response:tg:playbook-memory:%s" $s) -}}
{{- $_ := set $t "audit" (printf "flow:tg:memory-audit:%s" $s) -}}
{{- $_ := set $topics "playbook-memory" $t -}}
{{- end -}}
{{- if hasKey $on "working-memory" -}}
{{- $t := dict -}}
{{- $_ := set $t "request" (printf "request:tg:working-memory:%s" $s) -}}
{{- $_ := set $t "response" (printf "response:tg:working-memory:%s" $s) -}}
{{- $_ := set $t "text-completion-request" (printf "request:tg:text-completion:%s" $s) -}}
{{- $_ := set $t "text-completion-response" (printf "response:tg:text-completion:%s" $s) -}}
{{- $_ := set $topics "working-memory" $t -}}
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

{{/* Processors whose vector store is Qdrant (generated too). */}}
{{- define "react-mem.storeProcessors" -}}
fact-memory episode-memory conversation-memory playbook-memory
{{- end -}}
