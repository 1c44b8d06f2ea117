// Package podobjects serves the Secrets and ConfigMaps the agent's pods use (their volumes,
// env and envFrom, projected sources) as the kubelet's secret and config map managers do, under
// the three values of configMapAndSecretChangeDetectionStrategy:
//
//   - Watch (the default): each object a registered pod references is watched on its own (a
//     list and watch limited to its name), and reads are served from that watch. An immutable
//     object stops being watched once read; a watch no read used for a while is stopped and
//     started again by the next read.
//   - Cache: an object is fetched on first use and kept for the node's TTL (the
//     node.alpha.kubernetes.io/ttl annotation the TTL controller sets, else a minute);
//     registering a pod drops what it references, so a new pod never starts on stale data.
//   - Get: every read is a GET.
//
// Pods are registered before their volumes are made and unregistered after their volumes are
// gone; under Watch and Cache only registered pods' references are served.
package podobjects
