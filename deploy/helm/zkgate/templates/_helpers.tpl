{{- define "zkgate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "zkgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "zkgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "zkgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "zkgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "zkgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The pod's grace period: longer than the drain, or the chart refuses. */}}
{{- define "zkgate.gracePeriod" -}}
{{- $drain := int .Values.drainTimeoutSeconds -}}
{{- $grace := .Values.terminationGracePeriodSeconds | default (add $drain 25) | int -}}
{{- if le $grace $drain -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be longer than drainTimeoutSeconds (%d): the kubelet would kill gateways in the middle of their drain" $grace $drain) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{- define "zkgate.scheme" -}}
{{- if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}
