{{/* The pod, shared by the Deployment and the DaemonSet. */}}
{{- define "ccm.podTemplate" -}}
metadata:
  labels:
    {{- include "ccm.podSelectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $annotations := deepCopy .Values.podAnnotations }}
  {{- if .Values.cloudConfig.content }}
  {{- /* A changed config rolls the pods: the CCM reads it once, at start. */}}
  {{- $_ := set $annotations "checksum/cloud-config" (.Values.cloudConfig.content | sha256sum) }}
  {{- end }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- if .dryRunPod }}
  serviceAccountName: {{ include "ccm.fullname" . }}-dry-run
  {{- else }}
  serviceAccountName: {{ include "ccm.serviceAccountName" . }}
  {{- end }}
  automountServiceAccountToken: true
  priorityClassName: {{ .Values.priorityClassName }}
  {{- if .Values.hostNetwork }}
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: cloud-controller-manager
      image: {{ include "ccm.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        {{- include "ccm.args" . | nindent 8 }}
        {{- if .dryRunPod }}
        - --dry-run=true
        {{- end }}
      {{- with (include "ccm.env" . | trim) }}
      env:
        {{- . | nindent 8 }}
      {{- end }}
      ports:
        - name: https
          containerPort: {{ .Values.port }}
          protocol: TCP
        {{- if include "ccm.servesWebhook" . }}
        - name: webhook
          containerPort: {{ .Values.webhook.port }}
          protocol: TCP
        {{- end }}
      livenessProbe:
        {{- toYaml .Values.livenessProbe | nindent 8 }}
      readinessProbe:
        {{- toYaml .Values.readinessProbe | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if include "ccm.cloudConfigSecret" . }}
        - name: cloud-config
          mountPath: /etc/kubernetes/cloud-config
          readOnly: true
        {{- end }}
        {{- if include "ccm.servingCertSecret" . }}
        - name: serving-cert
          mountPath: /etc/kubernetes/pki/cloud-controller-manager
          readOnly: true
        {{- end }}
        {{- if and (include "ccm.servesWebhook" .) .Values.webhook.certManager.enabled }}
        - name: webhook-cert
          mountPath: /etc/webhook-certs
          readOnly: true
        {{- end }}
        {{- if and (include "ccm.servesWebhook" .) .Values.webhook.clientCAConfigMap }}
        - name: webhook-client-ca
          mountPath: /etc/webhook-client-ca
          readOnly: true
        {{- end }}
  volumes:
    - name: tmp
      emptyDir: {}
    {{- with include "ccm.cloudConfigSecret" . }}
    - name: cloud-config
      secret:
        secretName: {{ . }}
    {{- end }}
    {{- with include "ccm.servingCertSecret" . }}
    - name: serving-cert
      secret:
        secretName: {{ . }}
    {{- end }}
    {{- if and (include "ccm.servesWebhook" .) .Values.webhook.certManager.enabled }}
    - name: webhook-cert
      secret:
        secretName: {{ include "ccm.webhookTLSSecretName" . }}
    {{- end }}
    {{- if and (include "ccm.servesWebhook" .) .Values.webhook.clientCAConfigMap }}
    - name: webhook-client-ca
      configMap:
        name: {{ .Values.webhook.clientCAConfigMap }}
    {{- end }}
  {{- $nodeSelector := .Values.nodeSelector }}
  {{- if eq .Values.kind "DaemonSet" }}
  {{- $nodeSelector = merge (deepCopy .Values.nodeSelector) .Values.daemonSet.nodeSelector }}
  {{- end }}
  {{- with $nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .Values.affinity }}
  affinity:
    {{- toYaml .Values.affinity | nindent 4 }}
  {{- else if eq .Values.kind "Deployment" }}
  # Replicas on different nodes, so losing one node never stops the CCM.
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "ccm.podSelectorLabels" . | nindent 16 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
