package kubecontainer

// The labels the kubelet puts on every CRI sandbox and container. They are the agent's only memory
// of which pod a sandbox or container belongs to, so an agent restarted after SIGKILL rebuilds its
// view from the runtime alone; the PLEG, container GC and the agent's API read them, the runtime
// manager writes them, and crictl users and other tools read the same keys.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)
