// Command coredns is CoreDNS with the plugins a cluster's DNS server needs (the Corefile
// kubeadm deploys, less forward's upstreams, which nothing here reaches), for hack/cluster.sh.
// hack/kube/build.sh builds it in a wrapper module of its own: the upstream main imports every
// plugin, the cloud providers' SDKs with them, which a cluster DNS never uses.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The plugins' order in a server block is this list's, CoreDNS's own (plugin.cfg) kept.
func init() {
	dnsserver.Directives = []string{"reload", "ready", "health", "prometheus", "errors", "log",
		"loadbalance", "cache", "kubernetes", "loop", "forward"}
}

func main() { coremain.Run() }
