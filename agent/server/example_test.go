package server_test

import (
	"context"
	"time"

	kubeletconfig "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/auth"
	"github.com/nodelet/nodelet/agent/logs"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/recorder"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/stats"
)

// How an agent wires its API: pods and health from the agent, everything else over CRI.
func Example() {
	ctx := context.Background()
	conn, _ := grpc.NewClient("unix:///run/nodelet/runtime.sock",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// kubelet_runtime_operations_{total,duration_seconds,errors_total} for every CRI call.
		grpc.WithChainUnaryInterceptor(metrics.UnaryClientInterceptor()))
	rt := runtimeapi.NewRuntimeServiceClient(conn)

	var agentPods func() []*v1.Pod // the Agent's Pods: desired pods with their status
	var syncLoopHealthy func() error
	var rec recorder.Interface         // events to the apiserver, or to the log standalone
	events := recorder.NewHistory(rec) // keeps each pod's last events for `nodelet describe`

	api := server.New(server.Deps{
		NodeName:        "node1",
		Pods:            server.PodList(agentPods),
		Events:          events,
		Runtime:         rt,
		SyncLoopHealthy: syncLoopHealthy,
		Summary: stats.New(rt, stats.Options{NodeName: "node1", RootDir: "/var/lib/nodelet/agent",
			LogDir: "/var/log/pods", PodsCgroup: "/kubepods"}).Summary,
	})

	// In a cluster: the kubelet config's authentication/authorization, checked with the apiserver.
	var client kubernetes.Interface
	var kc kubeletconfig.KubeletConfiguration
	filter, _ := auth.FromConfig(kc.Authentication, kc.Authorization,
		client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), "node1")

	go api.Serve(ctx, server.ServeConfig{
		Socket:     "/run/nodelet/agent.sock", // root-only, for `nodelet get pods` and friends
		TCPAddress: ":10250",                  // only when asked (or in a cluster)
		TLS:        server.TLSOptions{CertDir: "/var/lib/nodelet/agent/pki", Hosts: []string{"node1", "192.168.1.10"}},
		Filter:     filter,
	})

	// Log rotation by containerLogMaxSize / containerLogMaxFiles.
	rotator, _ := logs.NewRotator(rt, "10Mi", 5)
	go rotator.Run(ctx, 10*time.Second)
}
