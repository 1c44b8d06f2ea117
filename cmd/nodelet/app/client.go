package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/server/apiclient"
)

// clock is the client verbs' present, which ages ("5m") and "ago" count from; tests fix it.
var clock = time.Now

// clientFlags are how the client verbs (get, describe, logs, exec, port-forward, top) reach the
// agent's API: its local socket by default, or HTTPS with a client certificate.
type clientFlags struct {
	endpoint   string
	namespace  string
	allNS      bool
	certFile   string
	keyFile    string
	caFile     string
	insecureTL bool
}

// bind adds the flags to cmd; withAll adds -A/--all-namespaces too.
func (c *clientFlags) bind(cmd *cobra.Command, withAll bool) {
	f := cmd.Flags()
	def := os.Getenv("NODELET_AGENT_ENDPOINT")
	if def == "" {
		def = apiclient.DefaultEndpoint
	}
	f.StringVar(&c.endpoint, "agent-endpoint", def, "the agent's API: unix:///path or https://host:10250 (env NODELET_AGENT_ENDPOINT)")
	f.StringVarP(&c.namespace, "namespace", "n", "default", "the namespace of the pod")
	if withAll {
		f.BoolVarP(&c.allNS, "all-namespaces", "A", false, "list pods of every namespace")
	}
	f.StringVar(&c.certFile, "client-certificate", "", "client certificate for an HTTPS endpoint")
	f.StringVar(&c.keyFile, "client-key", "", "key of --client-certificate")
	f.StringVar(&c.caFile, "certificate-authority", "", "CA that signed the agent's serving certificate")
	f.BoolVar(&c.insecureTL, "insecure-skip-tls-verify", false, "do not verify the agent's serving certificate (it is self-signed by default)")
}

func (c *clientFlags) client() (*apiclient.Client, error) {
	if !strings.HasPrefix(c.endpoint, "https://") {
		return apiclient.New(c.endpoint, nil)
	}
	cfg := &tls.Config{InsecureSkipVerify: c.insecureTL, MinVersion: tls.VersionTLS12}
	if c.caFile != "" {
		b, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s: no PEM certificates", c.caFile)
		}
	}
	if c.certFile != "" || c.keyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return apiclient.New(c.endpoint, cfg)
}

// podName accepts "NAME" and kubectl's "pod/NAME" and "pods/NAME".
func podName(arg string) (string, error) {
	if kind, name, ok := strings.Cut(arg, "/"); ok {
		switch strings.ToLower(kind) {
		case "pod", "pods", "po":
			return name, nil
		}
		return "", fmt.Errorf("only pods are supported, not %q", kind)
	}
	return arg, nil
}

// pod connects to the agent and fetches the pod arg names ("NAME" or podName's "pod/NAME"), with
// kubectl's message when there is no such pod: the opening of every verb that acts on one pod.
func (c *clientFlags) pod(ctx context.Context, arg string) (*apiclient.Client, *v1.Pod, error) {
	name, err := podName(arg)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.client()
	if err != nil {
		return nil, nil, err
	}
	pod, err := cl.Pod(ctx, c.namespace, name)
	if err != nil {
		return nil, nil, notFound(err, name)
	}
	return cl, pod, nil
}

// container is pod, then the container of it the verb acts on (pickContainer): the opening of
// attach, exec and logs.
func (c *clientFlags) container(cmd *cobra.Command, arg, container string) (*apiclient.Client, *v1.Pod, string, error) {
	cl, pod, err := c.pod(cmd.Context(), arg)
	if err != nil {
		return nil, nil, "", err
	}
	ctr, err := pickContainer(cmd, pod, container)
	if err != nil {
		return nil, nil, "", err
	}
	return cl, pod, ctr, nil
}

// bindContainer adds -c/--container, for the verbs that act on one container of a pod.
func bindContainer(cmd *cobra.Command, container *string) {
	cmd.Flags().StringVarP(container, "container", "c", "", "the container (default: the pod's only or default container)")
}

// notFound turns a missing pod into kubectl's message.
func notFound(err error, name string) error {
	if apiclient.IsNotFound(err) {
		return fmt.Errorf("pods %q not found", name)
	}
	return err
}

// pickContainer chooses the container a verb acts on: the one named, the pod's only one, or its
// kubectl.kubernetes.io/default-container (else the first, with a note on stderr, as kubectl does).
func pickContainer(cmd *cobra.Command, pod *v1.Pod, name string) (string, error) {
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	if name != "" {
		for _, c := range all {
			if c.Name == name {
				return name, nil
			}
		}
		for _, c := range pod.Spec.EphemeralContainers {
			if c.Name == name {
				return name, nil
			}
		}
		return "", fmt.Errorf("container %s is not valid for pod %s", name, pod.Name)
	}
	if len(pod.Spec.Containers) == 0 {
		return "", fmt.Errorf("pod %s has no containers", pod.Name)
	}
	if d := pod.Annotations["kubectl.kubernetes.io/default-container"]; d != "" {
		for _, c := range pod.Spec.Containers {
			if c.Name == d {
				return d, nil
			}
		}
	}
	first := pod.Spec.Containers[0].Name
	if len(pod.Spec.Containers) > 1 {
		var names []string
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Defaulted container %q out of: %s\n", first, strings.Join(names, ", "))
	}
	return first, nil
}
