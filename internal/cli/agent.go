package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/auth"
	"github.com/nodelet/nodelet/agent/logs"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/nodestatus"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/server/apiclient"
	"github.com/nodelet/nodelet/agent/stats"
)

// newAgentCmd is `nodelet agent`: the kubelet half alone, against any CRI runtime, standalone with
// static pods or joined to a cluster with --kubeconfig.
func newAgentCmd() *cobra.Command {
	var flags *agentconfig.Flags
	var servingFlags *agentconfig.ServingFlags
	var apiSocket string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent (a kubelet) against a CRI runtime",
		Long: `Run the node agent: it takes pods from a manifest folder (--pod-manifest-path), a URL
(--manifest-url) and/or a cluster (--kubeconfig), and runs them through the CRI runtime at
--container-runtime-endpoint (nodelet's own by default; containerd's or CRI-O's work the same).
Flags are named like the kubelet's; --config takes a KubeletConfiguration file and flags given on
the command line override it. State lives under --root-dir (default <--root>/agent). The agent's
API (nodelet get pods, logs, exec…) is served on the root-only --api-socket, and over HTTPS on
--address:--port (10250) in a cluster, or standalone when --port is given: client certificates
checked against --client-ca-file, bearer tokens by TokenReview, requests authorized by
SubjectAccessReview (--authorization-mode Webhook) or let through (AlwaysAllow). The serving
certificate is --tls-cert-file, or one the cluster signs (--rotate-server-certificates), or else
self-signed under --root-dir/pki.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.Config()
			if err != nil {
				return err
			}
			serving, err := servingFlags.Serving()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("root-dir") {
				cfg.RootDir = filepath.Join(global.root, "agent")
			}
			var client kubernetes.Interface
			if cfg.Kubeconfig != "" {
				rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
				if err != nil {
					return fmt.Errorf("kubeconfig: %w", err)
				}
				if client, err = kubernetes.NewForConfig(rc); err != nil {
					return fmt.Errorf("kubeconfig: %w", err)
				}
			}
			api := agentAPI{ServeConfig: server.ServeConfig{Socket: apiSocket}, client: client}
			if err := api.addTCP(cfg, serving); err != nil {
				return err
			}
			a, err := agent.New(cfg, agent.Options{
				KubeClient:  client,
				DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(metrics.UnaryClientInterceptor())},
			})
			if err != nil {
				return err
			}
			return runAgentAPI(cmd.Context(), a, cfg, api)
		},
	}
	flags = agentconfig.AddFlags(cmd.Flags())
	servingFlags = agentconfig.AddServingFlags(flags)
	cmd.Flags().StringVar(&apiSocket, "api-socket", strings.TrimPrefix(apiclient.DefaultEndpoint, "unix://"),
		"root-only unix socket of the agent's API; empty disables it")
	return cmd
}

// agentAPI is where the agent's API listens.
type agentAPI struct {
	server.ServeConfig
	// client, with a TCP listener, gets the listener's port into the Node's status.
	client kubernetes.Interface
	port   int32
	// certs, with serverTLSBootstrap, requests and renews the serving certificate.
	certs certificate.Manager
}

// addTCP adds the HTTPS listener serving asks for: always in a cluster (unless the port is 0),
// standalone only when a port was given. Authentication and authorization come from serving
// through auth.FromConfig, with the apiserver's TokenReview and SubjectAccessReview in a cluster.
func (api *agentAPI) addTCP(cfg agentconfig.Config, serving agentconfig.Serving) error {
	if serving.Port == 0 || (api.client == nil && !serving.PortSet) {
		return nil
	}
	var tokens auth.TokenReviewer
	var sar auth.SubjectAccessReviewer
	if api.client != nil {
		tokens = api.client.AuthenticationV1().TokenReviews()
		sar = api.client.AuthorizationV1().SubjectAccessReviews()
	}
	filter, err := auth.FromConfig(serving.Authentication, serving.Authorization, tokens, sar, cfg.NodeName)
	if err != nil {
		return fmt.Errorf("agent API on port %d: %w", serving.Port, err)
	}
	// The self-signed certificate names every address the apiserver or a person may dial.
	hosts := append([]string{cfg.NodeName, "localhost"}, cfg.NodeIPs...)
	hosts = append(hosts, "127.0.0.1", "::1")
	api.TCPAddress = net.JoinHostPort(serving.Address, strconv.Itoa(serving.Port))
	api.TLS = server.TLSOptions{CertFile: serving.TLSCertFile, KeyFile: serving.TLSPrivateKeyFile,
		CertDir: filepath.Join(cfg.RootDir, "pki"), Hosts: hosts}
	if serving.ServerTLSBootstrap && serving.TLSCertFile == "" {
		if api.client == nil {
			return errors.New("serverTLSBootstrap (--rotate-server-certificates) needs a cluster (--kubeconfig)")
		}
		client := api.client
		m, err := auth.ServingCertManager(func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
			cfg.NodeName, append([]string{cfg.NodeName}, cfg.NodeIPs...), api.TLS.CertDir)
		if err != nil {
			return err
		}
		api.certs = m
		// Until the cluster signs the request, handshakes fail: there is nothing to serve with yet.
		api.TLS.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := m.Current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate yet: its CertificateSigningRequest awaits approval")
		}
	}
	api.Filter = filter
	api.port = int32(serving.Port)
	if serving.Authentication.X509.ClientCAFile == "" && api.client != nil {
		// The apiserver authenticates to nodes by client certificate; with only tokens it gets 401.
		slog.Warn("no client CA (--client-ca-file, authentication.x509.clientCAFile): the apiserver's kubectl logs, exec and port-forward will be refused")
	}
	slog.Info("agent API", "https", api.TCPAddress, "authorization", string(serving.Authorization.Mode),
		"anonymous", serving.Authentication.Anonymous.Enabled != nil && *serving.Authentication.Anonymous.Enabled,
		"serverTLSBootstrap", api.certs != nil)
	return nil
}

// runAgent runs the agent with its API on a unix socket only; nodelet up calls it.
func runAgent(ctx context.Context, a *agent.Agent, cfg agentconfig.Config, apiSocket string) error {
	return runAgentAPI(ctx, a, cfg, agentAPI{ServeConfig: server.ServeConfig{Socket: apiSocket}})
}

// runAgentAPI runs the agent and, beside it, its API where api says and the rotation of container
// logs; either of the agent and its API ending stops both.
func runAgentAPI(ctx context.Context, a *agent.Agent, cfg agentconfig.Config, api agentAPI) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The kubelet's defaults: rotate a container's log past 10Mi, keep 5 files.
	if rot, err := logs.NewRotator(a.Runtime(), "10Mi", 5); err == nil {
		go rot.Run(ctx, 10*time.Second)
	}
	if api.certs != nil {
		api.certs.Start()
		defer api.certs.Stop()
	}
	apiErr := make(chan error, 1)
	if api.Socket != "" || api.TCPAddress != "" {
		summary := stats.New(a.Runtime(), stats.Options{
			NodeName: a.NodeName(), RootDir: cfg.RootDir, LogDir: cfg.PodLogsDir, PodsCgroup: cfg.CgroupRoot,
		})
		srv := server.New(server.Deps{
			NodeName: a.NodeName(), Pods: a, Events: a, Runtime: a.Runtime(),
			SyncLoopHealthy: a.Healthz, Summary: summary.Summary, Config: func() any { return cfg },
		})
		go func() {
			err := srv.Serve(ctx, api.ServeConfig)
			cancel()
			apiErr <- err
		}()
		if api.TCPAddress != "" && api.client != nil && cfg.RegisterNode {
			go nodestatus.PublishDaemonEndpoint(ctx, api.client, a.NodeName(), api.port, nil)
		}
	} else {
		apiErr <- nil
	}
	runErr := a.Run(ctx)
	cancel()
	if err := <-apiErr; err != nil && !errors.Is(err, context.Canceled) {
		return errors.Join(runErr, err)
	}
	return runErr
}
