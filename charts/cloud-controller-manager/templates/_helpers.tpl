{{/* The chart's name, or nameOverride. */}}
{{- define "ccm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: objects are called this. */}}
{{- define "ccm.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "ccm.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "ccm.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The pod's selector: the shadow's (`dryRun`) pods are another app, so
the CCM's Deployment, Service and PodDisruptionBudget never select them. */}}
{{- define "ccm.podSelectorLabels" -}}
{{- if .dryRunPod }}
app.kubernetes.io/name: {{ include "ccm.name" . }}-dry-run
app.kubernetes.io/instance: {{ .Release.Name }}
{{- else }}
{{- include "ccm.selectorLabels" . }}
{{- end }}
{{- end }}

{{- define "ccm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ccm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: cloud-controller-manager
app.kubernetes.io/managed-by: {{ .Release.Service }}
cloud-controller-manager/provider: {{ .Values.provider }}
{{- end }}

{{- define "ccm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ccm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The provider's binary: also its image's repository name. */}}
{{- define "ccm.binary" -}}
{{- printf "%s-cloud-controller-manager" .Values.provider }}
{{- end }}

{{- define "ccm.image" -}}
{{- $repository := default (include "ccm.binary" .) .Values.image.repository }}
{{- $image := printf "%s/%s" .Values.image.registry $repository | trimPrefix "/" }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $image .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $image (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding the cloud config, if any. */}}
{{- define "ccm.cloudConfigSecret" -}}
{{- if .Values.cloudConfig.existingSecret }}
{{- .Values.cloudConfig.existingSecret }}
{{- else if .Values.cloudConfig.content }}
{{- printf "%s-cloud-config" (include "ccm.fullname" .) }}
{{- end }}
{{- end }}

{{/* The admission webhook's Service, in the release namespace. */}}
{{- define "ccm.webhookServiceName" -}}
{{- printf "%s-webhook" (include "ccm.fullname" .) }}
{{- end }}

{{/* The ValidatingWebhookConfiguration (cluster-scoped). */}}
{{- define "ccm.webhookConfigurationName" -}}
{{- printf "%s-service-annotations" (include "ccm.fullname" .) }}
{{- end }}

{{/* The Secret where the CCM keeps its own CA and serving certificate
(webhook.certManager.enabled false). */}}
{{- define "ccm.webhookCertSecretName" -}}
{{- printf "%s-webhook-cert" (include "ccm.fullname" .) }}
{{- end }}

{{/* cert-manager's Certificate, and the Secret it writes (another name
than the CCM's own, so switching modes never has two owners of one Secret). */}}
{{- define "ccm.webhookCertificateName" -}}
{{- printf "%s-webhook" (include "ccm.fullname" .) }}
{{- end }}
{{- define "ccm.webhookTLSSecretName" -}}
{{- printf "%s-webhook-tls" (include "ccm.fullname" .) }}
{{- end }}

{{/* The metrics Service, and the name its serving certificate holds (what
the ServiceMonitor verifies). */}}
{{- define "ccm.metricsServiceName" -}}
{{- printf "%s-metrics" (include "ccm.fullname" .) }}
{{- end }}
{{- define "ccm.metricsServerName" -}}
{{- printf "%s.%s.svc" (include "ccm.metricsServiceName" .) .Release.Namespace }}
{{- end }}

{{/* The Secret with the HTTPS port's certificate (tls.crt, tls.key) and
the CA that issued it (ca.crt), or empty for a self-signed one made at
startup: tls.secretName when given; else, once something scrapes the port
through the metrics Service, cert-manager's (webhook.certManager.enabled)
or the chart's own. Two names, so switching modes never has two owners of
one Secret. */}}
{{- define "ccm.servingCertSecret" -}}
{{- if .Values.tls.secretName }}
{{- .Values.tls.secretName }}
{{- else if or .Values.metrics.service.enabled .Values.serviceMonitor.enabled }}
{{- if .Values.webhook.certManager.enabled }}
{{- printf "%s-metrics-tls" (include "ccm.fullname" .) }}
{{- else }}
{{- printf "%s-metrics-cert" (include "ccm.fullname" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Whether this pod serves the admission webhook: the CCM's pods do when
it is enabled, the shadow's (`dryRun`) never. "true" or empty. */}}
{{- define "ccm.servesWebhook" -}}
{{- if and .Values.webhook.enabled (not .dryRunPod) }}true{{ end }}
{{- end }}

{{/* Flags, upstream's spelling: `--flag=value` throughout (booleans need the `=`). */}}
{{- define "ccm.args" -}}
{{- $args := list (printf "--cloud-provider=%s" .Values.provider) }}
{{- if include "ccm.cloudConfigSecret" . }}
{{- $args = append $args (printf "--cloud-config=/etc/kubernetes/cloud-config/%s" .Values.cloudConfig.key) }}
{{- end }}
{{- $args = append $args (printf "--cluster-name=%s" .Values.clusterName) }}
{{- $controllers := .Values.controllers }}
{{- if .Values.kubeletServingCSRApprover.enabled }}
{{- $controllers = append $controllers "kubelet-serving-csr-approver" }}
{{- end }}
{{- $args = append $args (printf "--controllers=%s" (join "," $controllers)) }}
{{- $args = append $args (printf "--leader-elect=%t" .Values.leaderElection.enabled) }}
{{- if .Values.leaderElection.enabled }}
{{- $args = append $args (printf "--leader-elect-resource-namespace=%s" .Release.Namespace) }}
{{- $args = append $args (printf "--leader-elect-resource-name=%s" .Values.leaderElection.leaseName) }}
{{- end }}
{{- if .Values.useServiceAccountCredentials }}
{{- $args = append $args "--use-service-account-credentials=true" }}
{{- end }}
{{- $args = append $args (printf "--allocate-node-cidrs=%t" .Values.networking.allocateNodeCIDRs) }}
{{- $args = append $args (printf "--configure-cloud-routes=%t" .Values.networking.configureCloudRoutes) }}
{{- with .Values.networking.clusterCIDR }}
{{- $args = append $args (printf "--cluster-cidr=%s" .) }}
{{- end }}
{{- $args = append $args (printf "--bind-address=%s" .Values.bindAddress) }}
{{- $args = append $args (printf "--secure-port=%d" (int .Values.port)) }}
{{- if include "ccm.servingCertSecret" . }}
{{- $args = append $args "--tls-cert-file=/etc/kubernetes/pki/cloud-controller-manager/tls.crt" }}
{{- $args = append $args "--tls-private-key-file=/etc/kubernetes/pki/cloud-controller-manager/tls.key" }}
{{- end }}
{{- if include "ccm.servesWebhook" . }}
{{- $args = append $args "--webhooks=service-annotations" }}
{{- $args = append $args (printf "--webhook-secure-port=%d" (int .Values.webhook.port)) }}
{{- if .Values.webhook.certManager.enabled }}
{{- $args = append $args "--webhook-tls-cert-file=/etc/webhook-certs/tls.crt" }}
{{- $args = append $args "--webhook-tls-private-key-file=/etc/webhook-certs/tls.key" }}
{{- else }}
{{- $args = append $args (printf "--webhook-cert-secret=%s/%s" .Release.Namespace (include "ccm.webhookCertSecretName" .)) }}
{{- $args = append $args (printf "--webhook-service=%s/%s" .Release.Namespace (include "ccm.webhookServiceName" .)) }}
{{- $args = append $args (printf "--webhook-configuration=%s" (include "ccm.webhookConfigurationName" .)) }}
{{- end }}
{{- if .Values.webhook.clientCAConfigMap }}
{{- $args = append $args "--webhook-client-ca-file=/etc/webhook-client-ca/ca.crt" }}
{{- end }}
{{- if .Values.webhook.strict }}
{{- $args = append $args "--webhook-strict=true" }}
{{- end }}
{{- end }}
{{- $args = append $args (printf "--v=%d" (int .Values.verbosity)) }}
{{- $args = append $args (printf "--logging-format=%s" .Values.logFormat) }}
{{- range $name, $value := .Values.extraArgs }}
{{- $args = append $args (printf "--%s=%v" $name $value) }}
{{- end }}
{{- toYaml $args }}
{{- end }}

{{/* The provider's environment: credentials and settings. */}}
{{- define "ccm.env" -}}
{{- if eq .Values.provider "aws" }}
{{- with .Values.aws.region }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- with .Values.aws.credentialsSecret }}
{{- if .name }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .accessKeyIDKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .secretAccessKeyKey }}
{{- end }}
{{- end }}
{{- else if eq .Values.provider "digitalocean" }}
{{- with .Values.digitalocean }}
- name: DO_ACCESS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ required "digitalocean.tokenSecret.name is required: the Secret holding the DigitalOcean API token" .tokenSecret.name }}
      key: {{ .tokenSecret.key }}
{{- with .region }}
- name: REGION
  value: {{ . | quote }}
{{- end }}
{{- with .clusterID }}
- name: DO_CLUSTER_ID
  value: {{ . | quote }}
{{- end }}
{{- with .clusterVPCID }}
- name: DO_CLUSTER_VPC_ID
  value: {{ . | quote }}
{{- end }}
{{- with .apiRateLimitQPS }}
- name: DO_API_RATE_LIMIT_QPS
  value: {{ . | quote }}
{{- end }}
{{- with .overrideURL }}
- name: DO_OVERRIDE_URL
  value: {{ . | quote }}
{{- end }}
{{- with .defaultLBType }}
- name: DEFAULT_LB_TYPE
  value: {{ . | quote }}
{{- end }}
{{- with .publicAccessFirewall }}
{{- if or .name .tags }}
- name: PUBLIC_ACCESS_FIREWALL_NAME
  value: {{ required "digitalocean.publicAccessFirewall.name is required with its tags" .name | quote }}
- name: PUBLIC_ACCESS_FIREWALL_TAGS
  value: {{ required "digitalocean.publicAccessFirewall.tags are required with its name" (join "," .tags | default "") | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The kubelet-serving-csr-approver's rules: read the requests, write decisions
through the approval subresource, approve for the kubelet-serving signer
only (kube-apiserver's CertificateApproval admission checks this one).
*/}}
{{- define "ccm.csrApproverDecisionRules" -}}
- apiGroups: ["certificates.k8s.io"]
  resources: ["certificatesigningrequests/approval"]
  verbs: ["update"]
- apiGroups: ["certificates.k8s.io"]
  resources: ["signers"]
  resourceNames: ["kubernetes.io/kubelet-serving"]
  verbs: ["approve"]
{{- end }}

{{/*
PromQL label matchers picking this release's series: monitoring.rules.selector,
or the job the ServiceMonitor's Service gives them.
*/}}
{{- define "ccm.monitoringSelector" -}}
{{- .Values.monitoring.rules.selector | default (printf "job=%q" (printf "%s-metrics" (include "ccm.fullname" .))) -}}
{{- end }}
