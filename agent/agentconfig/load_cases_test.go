package agentconfig

// loadCase is one command line, with or without a --config file, that testdata/load.golden holds
// the outcome of: every (file, flags) pair the package's tests and cmd/nodelet/app's use, and the
// corners of the pipeline (repeated flags, flags over the file, values the file leaves out).
type loadCase struct {
	name string
	file string // "" gives no --config
	args []string
}

var loadCases = []loadCase{
	{name: "defaults"},
	{name: "empty file", file: header},

	// agentconfig_test.go
	{name: "file and flags", file: header + "staticPodPath: /etc/kubernetes/manifests\nmaxPods: 20\nsyncFrequency: 30s\nclusterDNS: [10.96.0.10]\nfailSwapOn: false\n",
		args: []string{"--max-pods=7", "--hostname-override=Node-A", "--node-ip=192.0.2.1"}},
	{name: "unknown field", file: header + "staticPodPaht: /x\n"},
	{name: "wrong kind", file: "apiVersion: v1\nkind: Pod\n"},
	{name: "systemd driver", file: header + "cgroupDriver: systemd\n"},
	{name: "bad type", file: header + "maxPods: many\n"},
	{name: "bad node ip", args: []string{"--node-ip=node.example"}},
	{name: "bad endpoint", args: []string{"--container-runtime-endpoint=tcp://x"}},
	{name: "zero max pods", args: []string{"--max-pods=0"}},
	{name: "k8s label", args: []string{"--node-labels=node-role.kubernetes.io/master="}},
	{name: "bad label", args: []string{"--node-labels=a b=c"}},
	{name: "taint effect", args: []string{"--register-with-taints=a=b:Sometimes"}},
	{name: "taint spelling", args: []string{"--register-with-taints=a=b"}},
	{name: "file taint", file: header + "registerWithTaints: [{key: a, effect: Never}]\n"},
	{name: "labels and file taints", file: header + "registerWithTaints: [{key: dedicated, value: edge, effect: NoExecute}]\n",
		args: []string{"--node-labels=node.kubernetes.io/exclude-from-external-load-balancers=,example.com/rack=r1"}},
	{name: "flag taints", args: []string{"--register-with-taints=a=b:NoSchedule,c:PreferNoSchedule"}},
	{name: "image and container GC", file: header + "serializeImagePulls: false\nmaxParallelImagePulls: 3\nimageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 5m\n",
		args: []string{"--maximum-dead-containers-per-container=2", "--image-gc-low-threshold=40"}},
	{name: "parallel pulls serialized", file: header + "maxParallelImagePulls: 3\n"},
	{name: "image GC low over high", file: header + "imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n"},
	{name: "image GC over 100", file: header + "imageGCHighThresholdPercent: 101\n"},
	{name: "sysctls file", file: header + "allowedUnsafeSysctls: [\"kernel.msg*\", net.core.somaxconn]\n"},
	{name: "sysctls flag wins", file: header + "allowedUnsafeSysctls: [\"kernel.msg*\"]\n", args: []string{"--allowed-unsafe-sysctls=net.*"}},
	{name: "sysctl not namespaced", args: []string{"--allowed-unsafe-sysctls=kernel.panic"}},
	{name: "sysctl malformed", file: header + "allowedUnsafeSysctls: [\"*\"]\n"},

	// eviction_test.go
	{name: "eviction file", file: header + evictionFile},
	{name: "eviction flags over the file", file: header + evictionFile,
		args: []string{"--eviction-hard=pid.available<1000,memory.available<300Mi", "--eviction-soft=",
			"--eviction-soft-grace-period=", "--eviction-max-pod-grace-period=5", "--eviction-pressure-transition-period=1m"}},
	{name: "eviction unknown signal in file", file: header + "evictionHard: {memory.free: 1Gi}\n"},
	{name: "eviction bad quantity flag", args: []string{"--eviction-hard=memory.available<lots"}},
	{name: "eviction malformed flag", args: []string{"--eviction-hard=memory.available=1Gi"}},
	{name: "eviction soft without grace", args: []string{"--eviction-soft=memory.available<1Gi"}},
	{name: "eviction grace without soft", args: []string{"--eviction-soft-grace-period=memory.available=1m"}},
	{name: "eviction negative max grace", args: []string{"--eviction-max-pod-grace-period=-1"}},
	{name: "eviction bad reclaim", args: []string{"--eviction-minimum-reclaim=nodefs.available=x"}},
	{name: "eviction unsupported signal", args: []string{"--eviction-hard=containerfs.available<1Gi"}},
	{name: "eviction allocatable uncapped", args: []string{"--eviction-hard=allocatableMemory.available<1Gi", "--enforce-node-allocatable=none"}},
	{name: "evictionHard replaces the defaults", file: header + "evictionHard: {memory.available: 1Gi}\n"},
	{name: "evictionHard merged", file: header + "evictionHard: {memory.available: 1Gi}\nmergeDefaultEvictionSettings: true\n"},
	{name: "evictionHard empty", file: header + "evictionHard: {}\n"},
	{name: "allocatable file", file: header + "systemReserved: {cpu: 500m, memory: 1Gi}\nkubeReserved: {memory: 256Mi, pid: \"1000\"}\n" +
		"enforceNodeAllocatable: [pods, system-reserved]\nsystemReservedCgroup: /system.slice\n"},
	{name: "allocatable flags over the file", file: header + "systemReserved: {cpu: 500m}\n",
		args: []string{"--system-reserved=memory=2Gi", "--enforce-node-allocatable="}},
	{name: "no per-QoS cgroups", file: header + "cgroupsPerQOS: false\n"},
	{name: "enforce pods without cgroups", file: header + "cgroupsPerQOS: false\nenforceNodeAllocatable: [pods]\n"},
	{name: "enforce kube-reserved without cgroup", file: header + "enforceNodeAllocatable: [kube-reserved]\nkubeReserved: {cpu: 1}\n"},
	{name: "reserve huge pages", file: header + "systemReserved: {hugepages-2Mi: 1Gi}\n"},
	{name: "reserve negative", file: header + "kubeReserved: {memory: -1}\n"},
	{name: "pod pids file", file: header + "podPidsLimit: 1024\n"},
	{name: "pod pids flag over the file", file: header + "podPidsLimit: 1024\n", args: []string{"--pod-max-pids=-1"}},
	{name: "pod pids without cgroups", file: header + "podPidsLimit: 1024\ncgroupsPerQOS: false\n"},
	{name: "pods per core", file: header + "podsPerCore: 10\n", args: []string{"--max-pods=50"}},
	{name: "pods per core negative", args: []string{"--pods-per-core=-1"}},
	{name: "local storage isolation true", file: header + "localStorageCapacityIsolation: true\n"},
	{name: "local storage isolation false", file: header + "localStorageCapacityIsolation: false\n"},
	{name: "cpu manager file", file: header + "cpuManagerPolicy: static\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\ncpuManagerReconcilePeriod: 5s\n" +
		"reservedSystemCPUs: \"0,2\"\nsystemReserved: {cpu: 500m, memory: 1Gi}\nkubeReserved: {cpu: 200m}\ntopologyManagerPolicy: single-numa-node\n"},
	{name: "cpu manager flags", args: []string{"--cpu-manager-policy=static", "--reserved-cpus=1", "--topology-manager-scope=pod"}},
	{name: "cpu manager dynamic flag", args: []string{"--cpu-manager-policy=dynamic"}},

	// serving_test.go
	{name: "serving file", file: servingFile},
	{name: "serving flags over the file", file: servingFile,
		args: []string{"--port", "0", "--client-ca-file", "/x.crt", "--authorization-mode", "Webhook", "--address", "127.0.0.1"}},
	{name: "certificate without key", args: []string{"--tls-cert-file", "/a.crt"}},
	{name: "bad authorization mode", args: []string{"--authorization-mode", "RBAC"}},
	{name: "bad address", args: []string{"--address", "localhost"}},
	{name: "anonymous off in file", file: header + "authentication: {anonymous: {enabled: false}}\n"},
	{name: "enableServer false with TLS", file: header + "enableServer: false\ntlsCertFile: /x\ntlsPrivateKeyFile: /y\n"},
	{name: "port in file", file: header + "port: 10250\n"},
	{name: "TLS in file", file: header + "tlsCertFile: /x\ntlsPrivateKeyFile: /y\n"},
	{name: "AlwaysAllow in file", file: header + "authorization: {mode: AlwaysAllow}\n"},
	{name: "maxPods only", file: header + "maxPods: 10\n"},

	// configz_test.go
	{name: "rich", file: richConfig},
	{name: "rich with flags", file: richConfig, args: []string{"--max-pods=64", "--kubeconfig=/etc/kubernetes/kubelet.conf"}},
	{name: "configz", file: header + "maxPods: 42\nclusterDomain: cluster.example\ncgroupRoot: /custom\nevictionHard: {memory.available: 200Mi}\nmergeDefaultEvictionSettings: true\n",
		args: []string{"--max-pods=64", "--kubeconfig=/etc/kubernetes/kubelet.conf"}},

	// seccomp_test.go
	{name: "seccomp file", file: header + "seccompDefault: true\n"},
	{name: "seccomp flag", args: []string{"--seccomp-default"}},
	{name: "seccomp flag beats file", file: header + "seccompDefault: true\n", args: []string{"--seccomp-default=false"}},

	// fields_test.go
	{name: "values: cpu manager dynamic", file: header + "cpuManagerPolicy: dynamic\n"},
	{name: "values: cpu manager static", file: header + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"},
	{name: "values: reserved cpus", file: header + "reservedSystemCPUs: 0-x\n"},
	{name: "values: topology single", file: header + "topologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\n"},
	{name: "values: topology scope", file: header + "topologyManagerScope: node\n"},
	{name: "values: cpu manager none", file: header + "cpuManagerPolicy: none\n"},
	{name: "values: memory manager static", file: header + "memoryManagerPolicy: Static\n"},
	{name: "values: memory manager None", file: header + "memoryManagerPolicy: None\n"},
	{name: "values: topology restricted", file: header + "topologyManagerPolicy: restricted\n"},
	{name: "values: topology none", file: header + "topologyManagerPolicy: none\n"},
	{name: "values: read-only port", file: header + "readOnlyPort: 10255\n"},
	{name: "values: read-only port 0", file: header + "readOnlyPort: 0\n"},
	{name: "values: enforce nothing", file: header + "enforceNodeAllocatable: []\n"},
	{name: "values: same image endpoint", file: header + "containerRuntimeEndpoint: unix:///run/x.sock\nimageServiceEndpoint: unix:///run/x.sock\n"},
	{name: "values: other image endpoint", file: header + "imageServiceEndpoint: unix:///run/y.sock\n"},
	{name: "values: feature gate", file: header + "featureGates: {InPlacePodVerticalScaling: true}\n"},
	{name: "values: swap", file: header + "memorySwap: {swapBehavior: LimitedSwap}\n"},
	{name: "values: no swap", file: header + "memorySwap: {}\n"},
	{name: "values: back-off 300s", file: header + "crashLoopBackOff: {maxContainerRestartPeriod: 5m}\n"},
	{name: "values: back-off 1m", file: header + "crashLoopBackOff: {maxContainerRestartPeriod: 1m}\n"},
	{name: "values: userns 65536 ids", file: header + "userNamespaces: {idsPerPod: 65536}\n"},
	{name: "values: userns default ids", file: header + "userNamespaces: {}\n"},
	{name: "values: userns 131072 ids", file: header + "userNamespaces: {idsPerPod: 131072}\n"},
	{name: "values: report == update", file: header + "nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 20s\n"},
	{name: "values: report != update", file: header + "nodeStatusReportFrequency: 5m\n"},
	{name: "values: json logs", file: header + "logging: {format: json}\n"},
	{name: "values: verbose", file: header + "logging: {verbosity: 4}\n"},
	{name: "values: two refused", file: header + "runOnce: true\nshutdownGracePeriod: 30s\n"},
	{name: "values: kubeadm logging", file: header + "logging: {flushFrequency: 0, options: {json: {infoBufferSize: \"0\"}, text: {infoBufferSize: \"0\"}}, verbosity: 0}\n"},
	{name: "client settings", file: header + "kubeAPIQPS: 20\nkubeAPIBurst: 40\ncontentType: application/vnd.kubernetes.protobuf\ncontainerLogMaxSize: 1Mi\n" +
		"containerLogMaxFiles: 3\ncontainerLogMonitorInterval: 30s\nfailSwapOn: false\nfailCgroupV1: false\n"},
	{name: "client flags over the file", file: header + "containerLogMaxSize: 1Mi\n", args: []string{"--container-log-max-size=2Mi", "--kube-api-qps=-1"}},
	{name: "report frequency", file: header + "nodeStatusReportFrequency: 1m\n"},
	{name: "update frequency only", file: header + "nodeStatusUpdateFrequency: 20s\n"},
	{name: "update and report frequency", file: header + "nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 2m\n"},
	{name: "log size bad", file: header + "containerLogMaxSize: lots\n"},
	{name: "log files 1", file: header + "containerLogMaxFiles: 1\n"},
	{name: "log interval 1s", file: header + "containerLogMonitorInterval: 1s\n"},
	{name: "enableServer false with port", file: header + "enableServer: false\nport: 10250\n"},

	// cmd/nodelet/app's agent_test.go, and agent/integration's command line
	{name: "cli bad node ip", args: []string{"--node-ip=not-an-ip"}},
	{name: "cli standalone HTTPS", args: []string{"--container-runtime-endpoint", "unix:///tmp/t/no-runtime.sock",
		"--root-dir", "/tmp/t/root", "--pod-logs-dir", "/tmp/t/logs", "--hostname-override", "n1", "--node-ip", "127.0.0.1",
		"--healthz-port", "0", "--cgroup-root", "", "--address", "127.0.0.1", "--port", "10999", "--client-ca-file", "/tmp/t/ca.crt",
		"--authentication-token-webhook=false", "--authorization-mode", "AlwaysAllow"}},
	{name: "cli cluster", args: []string{"--kubeconfig", "/tmp/t/admin.conf", "--root-dir", "/tmp/t/root", "--pod-logs-dir", "/tmp/t/logs",
		"--hostname-override", "n1", "--healthz-port", "0", "--cgroup-root", "/nodelet-test/kubepods"}},

	// The pipeline's corners.
	{name: "every flag", args: append(everyServingFlag, everyFlag...)},
	{name: "every flag over the rich file", file: richConfig, args: append(everyFlag, everyServingFlag...)},
	{name: "every flag but the serving ones", args: everyFlag},
	{name: "fractional qps", args: []string{"--kube-api-qps=0.5"}},
	{name: "repeated flags", args: []string{"--max-pods=5", "--max-pods=9", "--node-labels=a=b", "--node-labels=c=d",
		"--register-with-taints=a:NoSchedule", "--register-with-taints=b=c:NoExecute", "--eviction-hard=memory.available<1Gi",
		"--eviction-hard=nodefs.available<5%", "--cluster-dns=10.0.0.1", "--cluster-dns=10.0.0.2,10.0.0.3", "--node-ip=192.0.2.5", "--node-ip=192.0.2.6"}},
	{name: "quoted taint", args: []string{`--register-with-taints="a=b:NoSchedule",c:NoExecute`}},
	{name: "bad csv taint", args: []string{`--register-with-taints="a`}},
	{name: "map flags replace the file's", file: header + "systemReserved: {cpu: 500m}\nkubeReserved: {memory: 1Gi}\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n" +
		"evictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: 1m}\n",
		args: []string{"--kube-reserved=cpu=1", "--cpu-manager-policy-options=full-pcpus-only=false", "--eviction-soft=nodefs.available<20%", "--eviction-soft-grace-period=nodefs.available=2m"}},
	{name: "cgroup root flag over cgroupsPerQOS false", file: header + "cgroupsPerQOS: false\n", args: []string{"--cgroup-root=/x"}},
	{name: "cgroup root in file", file: header + "cgroupRoot: /nodelet/\n"},
	{name: "cgroup root in file, flag wins", file: header + "cgroupRoot: /nodelet\n", args: []string{"--cgroup-root=/y/kubepods"}},
	{name: "non-positive durations and counts in the file", file: header + "syncFrequency: -1s\nfileCheckFrequency: 0s\nruntimeRequestTimeout: -2m\n" +
		"nodeStatusUpdateFrequency: -1s\nimageMinimumGCAge: -1m\nevictionPressureTransitionPeriod: -1s\ncpuManagerReconcilePeriod: -1s\n" +
		"maxPods: -3\nnodeLeaseDurationSeconds: -1\nauthentication: {webhook: {cacheTTL: -1s}}\nauthorization: {webhook: {cacheAuthorizedTTL: -1s}}\n"},
	{name: "empty lists in the file", file: header + "clusterDNS: []\nallowedUnsafeSysctls: []\nregisterWithTaints: []\ncpuManagerPolicyOptions: {}\n" +
		"staticPodURLHeader: {}\nsystemReserved: {}\nevictionSoft: {}\n"},
	{name: "empty list flags", args: []string{"--cluster-dns=", "--allowed-unsafe-sysctls=", "--register-with-taints=", "--resolv-conf="}},
	{name: "enableServer false, --port wins", file: header + "enableServer: false\n", args: []string{"--port=10300"}},
	{name: "negative port in file", file: header + "port: -1\n"},
	{name: "zero port flag", args: []string{"--port=0"}},
	{name: "flag durations zero", args: []string{"--minimum-image-ttl-duration=0", "--minimum-container-ttl-duration=0", "--eviction-pressure-transition-period=0"}},
	{name: "node ip empty", args: []string{"--node-ip="}},
	{name: "unknown flag", args: []string{"--no-such-flag"}},
	{name: "bad int flag", args: []string{"--max-pods=many"}},
	{name: "bad bool flag", args: []string{"--register-node=maybe"}},
	{name: "bad duration flag", args: []string{"--sync-frequency=soon"}},
	{name: "bad float flag", args: []string{"--kube-api-qps=fast"}},
	{name: "static pod URL and header", file: header + "staticPodURL: http://192.0.2.9/pods\nstaticPodURLHeader: {X-Token: [a, b]}\nhttpCheckFrequency: 7s\n",
		args: []string{"--manifest-url=http://192.0.2.10/pods"}},
	{name: "resolv conf empty in file", file: header + "resolvConf: \"\"\n"},
	{name: "healthz port 0 in file", file: header + "healthzPort: 0\nregisterNode: false\nserializeImagePulls: false\n"},
	{name: "many errors at once", file: header + "maxParallelImagePulls: -1\ncontainerLogMaxFiles: 0\npodsPerCore: -2\ntopologyManagerScope: node\n",
		args: []string{"--max-pods=0", "--sync-frequency=-1s", "--container-runtime-endpoint=tcp://x"}},
	{name: "pod CIDR", file: header + "podCIDR: 10.244.0.0/24,fd00::/64\n"},
	{name: "pod CIDR two v4", args: []string{"--pod-cidr=10.0.0.0/24,10.1.0.0/24"}},
	{name: "unreadable file", file: "\x00not yaml: ["},
}

const evictionFile = `evictionHard: {memory.available: 200Mi}
evictionSoft: {memory.available: 1Gi, nodefs.available: 15%}
evictionSoftGracePeriod: {memory.available: 1m30s, nodefs.available: 2m}
evictionMinimumReclaim: {memory.available: 50Mi}
evictionMaxPodGracePeriod: 60
evictionPressureTransitionPeriod: 30s
kernelMemcgNotification: true
`

const servingFile = header + `port: 11250
tlsCertFile: /etc/k/tls.crt
tlsPrivateKeyFile: /etc/k/tls.key
serverTLSBootstrap: true
authentication:
  x509: {clientCAFile: /etc/k/ca.crt}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
`

// everyFlag sets every flag of the agent but the HTTPS API's to a valid value other than its default.
var everyFlag = []string{
	"--container-runtime-endpoint=unix:///run/containerd/containerd.sock", "--runtime-request-timeout=3m",
	"--pod-manifest-path=/etc/m", "--manifest-url=http://192.0.2.1/p", "--kubeconfig=/etc/k.conf", "--hostname-override=Flag-Node",
	"--node-ip=192.0.2.7,2001:db8::7", "--root-dir=/var/lib/x", "--pod-logs-dir=/var/log/x", "--max-pods=33", "--pod-cidr=10.9.0.0/16",
	"--sync-frequency=33s", "--cluster-dns=10.0.0.10", "--cluster-domain=flag.example", "--resolv-conf=/etc/r.conf", "--cgroup-root=/f/kubepods",
	"--healthz-port=10333", "--healthz-bind-address=127.0.0.3", "--register-node=false", "--serialize-image-pulls=false",
	"--max-parallel-image-pulls=4", "--image-gc-high-threshold=77", "--image-gc-low-threshold=66", "--minimum-image-ttl-duration=7m",
	"--pod-infra-container-image=example.com/pause:1", "--minimum-container-ttl-duration=1m", "--maximum-dead-containers-per-container=3",
	"--maximum-dead-containers=30", "--allowed-unsafe-sysctls=net.ipv4.ip_local_port_range", "--seccomp-default",
	"--node-labels=example.com/a=b", "--eviction-hard=memory.available<300Mi,nodefs.available<7%", "--eviction-soft=memory.available<600Mi",
	"--eviction-soft-grace-period=memory.available=30s", "--eviction-minimum-reclaim=memory.available=10Mi", "--eviction-max-pod-grace-period=20",
	"--eviction-pressure-transition-period=40s", "--kube-api-qps=7", "--kube-api-burst=14", "--kube-api-content-type=application/json",
	"--container-log-max-size=5Mi", "--container-log-max-files=7", "--system-reserved=memory=100Mi", "--kube-reserved=memory=50Mi",
	"--enforce-node-allocatable=pods,kube-reserved", "--system-reserved-cgroup=/sys.slice", "--kube-reserved-cgroup=/kube.slice",
	"--pods-per-core=5", "--pod-max-pids=500", "--fail-swap-on=false", "--fail-cgroupv1=false", "--cpu-manager-policy=static",
	"--cpu-manager-policy-options=full-pcpus-only=true", "--cpu-manager-reconcile-period=3s", "--reserved-cpus=0",
	"--topology-manager-policy=single-numa-node", "--topology-manager-scope=pod", "--register-with-taints=k=v:NoSchedule",
}

// everyServingFlag sets every flag of the HTTPS API to a valid value other than its default.
var everyServingFlag = []string{
	"--address=192.0.2.7", "--port=10260", "--tls-cert-file=/t.crt", "--tls-private-key-file=/t.key", "--rotate-server-certificates",
	"--client-ca-file=/ca.crt", "--anonymous-auth", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow",
}
