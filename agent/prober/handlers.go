package prober

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxBody is how much of an HTTP probe's answer is read, as the kubelet's 10 KiB.
const maxBody = 10 << 10

// once runs the probe a single time. A probe that passes with a warning (an HTTP redirect it did
// not follow: to another host, or past ten) returns the warning, which the kubelet reports as a
// ProbeWarning event.
func (w *worker) once(ctx context.Context) (warning string, err error) {
	p := w.probe
	timeout := seconds(p.TimeoutSeconds, 1)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := "127.0.0.1"
	if len(w.ips) > 0 {
		host = w.ips[0]
	}
	switch {
	case p.Exec != nil:
		r, err := w.m.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: w.containerID, Cmd: p.Exec.Command,
			Timeout: int64(timeout / time.Second)})
		if err != nil {
			return "", err
		}
		if r.ExitCode != 0 {
			return "", fmt.Errorf("exit code %d: %s", r.ExitCode, r.Stdout)
		}
		return "", nil
	case p.HTTPGet != nil:
		g := p.HTTPGet
		if g.Host != "" {
			host = g.Host
		}
		port, err := w.port(g.Port)
		if err != nil {
			return "", err
		}
		scheme := "http"
		if g.Scheme == v1.URISchemeHTTPS {
			scheme = "https"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+g.Path, nil)
		if err != nil {
			return "", err
		}
		for _, h := range g.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		req.Header.Set("User-Agent", "kube-probe/1.36")
		resp, err := probeClient.Do(req)
		if err != nil {
			return "", err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		if err != nil {
			return "", err
		}
		switch {
		case resp.StatusCode < 200 || resp.StatusCode >= 400:
			return "", fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		case resp.StatusCode >= 300:
			return fmt.Sprintf("Probe terminated redirects, Response body: %s", body), nil
		}
		return "", nil
	case p.TCPSocket != nil:
		if p.TCPSocket.Host != "" {
			host = p.TCPSocket.Host
		}
		port, err := w.port(p.TCPSocket.Port)
		if err != nil {
			return "", err
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return "", err
		}
		return "", c.Close()
	case p.GRPC != nil:
		return "", grpcProbe(ctx, host, p.GRPC)
	}
	return "", fmt.Errorf("unsupported probe handler (exec, httpGet, tcpSocket and grpc are supported)")
}

// grpcProbe asks the standard gRPC health service; only SERVING passes.
func grpcProbe(ctx context.Context, host string, g *v1.GRPCAction) error {
	conn, err := grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(int(g.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent("kube-probe/1.36"))
	if err != nil {
		return err
	}
	defer conn.Close()
	var req healthRequest
	if g.Service != nil {
		req.service = *g.Service
	}
	var resp healthResponse
	if err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &req, &resp, grpc.ForceCodecV2(healthCodec{})); err != nil {
		return fmt.Errorf("gRPC health check: %w", err)
	}
	if resp.status != healthServing {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.statusName())
	}
	return nil
}

// The health service's two messages (grpc/health/v1/health.proto), in the protobuf wire format by
// hand: the generated package registers its file descriptor from an init, which every mode of
// nodelet would run for a probe only the agent makes.
//
//	message HealthCheckRequest { string service = 1; }
//	message HealthCheckResponse { ServingStatus status = 1; }
type healthRequest struct{ service string }

type healthResponse struct{ status uint64 }

const healthServing = 1

// statusName is the ServingStatus enum's name, as the generated type prints it.
func (r *healthResponse) statusName() string {
	switch r.status {
	case 0:
		return "UNKNOWN"
	case 1:
		return "SERVING"
	case 2:
		return "NOT_SERVING"
	case 3:
		return "SERVICE_UNKNOWN"
	}
	return strconv.FormatUint(r.status, 10)
}

// healthCodec marshals a healthRequest and unmarshals a healthResponse.
type healthCodec struct{}

func (healthCodec) Name() string { return "proto" }

func (healthCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*healthRequest)
	if !ok {
		return nil, fmt.Errorf("health codec: cannot marshal %T", v)
	}
	var b []byte
	if r.service != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, r.service)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (healthCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*healthResponse)
	if !ok {
		return fmt.Errorf("health codec: cannot unmarshal into %T", v)
	}
	*r = healthResponse{}
	b := data.Materialize()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			val, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			r.status, b = val, b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

// probeClient keeps no connections, as probes are sparse; like the kubelet's it accepts any
// certificate (pods serve self-signed ones) and follows redirects only on the same host.
var probeClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 || req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

func (w *worker) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	if c := w.spec(); c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("no port named %q", p.StrVal)
}
