{{/* Names, labels and shared values of the Onyx chart. */}}

{{- define "onyx.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, with the chart name unless it already contains it. */}}
{{- define "onyx.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "onyx.selectorLabels" -}}
app.kubernetes.io/name: {{ include "onyx.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "onyx.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "onyx.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: onyx
{{- end }}

{{- define "onyx.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "onyx.kafkaCluster" -}}
{{- default (include "onyx.fullname" .) .Values.kafka.clusterName }}
{{- end }}

{{- define "onyx.bootstrapServers" -}}
{{- default (printf "%s-kafka-bootstrap:9092" (include "onyx.kafkaCluster" .)) .Values.kafka.bootstrapServers }}
{{- end }}

{{- define "onyx.overlayConfigMap" -}}
{{- printf "%s-overlay" (include "onyx.fullname" .) }}
{{- end }}

{{- define "onyx.sparkServiceAccount" -}}
{{- default (printf "%s-spark" (include "onyx.fullname" .)) .Values.brokers.serviceAccount.name }}
{{- end }}

{{- define "onyx.registryDatabaseSecret" -}}
{{- default (printf "%s-registry-db" (include "onyx.fullname" .)) .Values.registry.database.existingSecret }}
{{- end }}

{{/* true when the registration service keeps its data in SQLite on a volume. */}}
{{- define "onyx.registrySqlite" -}}
{{- if and (not .Values.registry.database.url) (not .Values.registry.database.existingSecret) }}true{{ end }}
{{- end }}

{{/* The Kafka user (and its password Secret) of broker (list $ key). */}}
{{- define "onyx.brokerUser" -}}
{{- printf "%s-broker-%s" (include "onyx.fullname" (index . 0)) (index . 1) }}
{{- end }}

{{- define "onyx.registryUser" -}}
{{- printf "%s-registry" (include "onyx.fullname" .) }}
{{- end }}

{{/* Environment variables with which a Kafka client authenticates as user (list $ user). */}}
{{- define "onyx.kafkaAuthEnv" -}}
{{- $ := index . 0 }}
{{- if $.Values.security.enabled }}
- name: ONYX_KAFKA_USERNAME
  value: {{ index . 1 | quote }}
- name: ONYX_KAFKA_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 | quote }}
      key: password
- name: ONYX_KAFKA_SECURITY_PROTOCOL
  value: SASL_PLAINTEXT
- name: ONYX_KAFKA_SASL_MECHANISM
  value: SCRAM-SHA-512
{{- end }}
{{- end }}

{{/* The user id of the image (deploy/image/Containerfile SPARK_UID): the owner of what its pods write. */}}
{{- define "onyx.imageUid" -}}
185
{{- end }}

{{/* The archive writer's SparkApplication; its PersistentVolumeClaim and Kafka user bear the same name. */}}
{{- define "onyx.archiveName" -}}
{{- printf "%s-archive" (include "onyx.fullname" .) }}
{{- end }}

{{/* The archive on its volume (what the writer writes and the registration service reads)... */}}
{{- define "onyx.archiveDir" -}}
{{- printf "%s/data" (trimSuffix "/" .Values.archive.volume.mountPath) }}
{{- end }}

{{/* ... and the writer's checkpoint beside it (see archive.volume in values.yaml). */}}
{{- define "onyx.archiveCheckpointDir" -}}
{{- printf "%s/checkpoint" (trimSuffix "/" .Values.archive.volume.mountPath) }}
{{- end }}

{{/*
The affinity of the pods that mount the archive volume besides the writer's driver (its
executors, the registration service): a ReadWriteOnce volume is attached to one node, the
driver's, so they must run there. Empty with ReadWriteMany.
*/}}
{{- define "onyx.archiveAffinity" -}}
{{- if eq .Values.archive.volume.accessMode "ReadWriteOnce" }}
podAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          spark-app: {{ include "onyx.archiveName" . }}
          spark-role: driver
{{- end }}
{{- end }}
