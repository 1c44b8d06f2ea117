package kuberuntime

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/podmanager"
)

// ServiceLister gives the cluster's Services for the service environment variables
// (*services.Lister).
type ServiceLister interface {
	// HasSynced is false until the first list arrived: before that a container would start
	// without KUBERNETES_SERVICE_HOST, which in-cluster clients need.
	HasSynced() bool
	List() ([]*v1.Service, error)
}

// errServicesNotSynced keeps a container from being created before the Services are known; the
// pod's next sync tries again.
var errServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// serviceEnv is the docker-link style variables of the Services a container of pod sees: those of
// its namespace when enableServiceLinks is on (the default), and the apiserver's own Service
// (default/kubernetes) always, so in-cluster clients find it. Keys come back sorted, so the
// container config does not change from one sync to the next.
func (m *Manager) serviceEnv(pod *v1.Pod) ([]string, map[string]string, error) {
	if m.Services == nil {
		return nil, nil, nil // standalone: no apiserver, no Services
	}
	// Static pods do not wait: they may be what brings the apiserver up.
	if !podmanager.IsStaticPod(pod) && !m.Services.HasSynced() {
		return nil, nil, errServicesNotSynced
	}
	all, err := m.Services.List()
	if err != nil {
		return nil, nil, fmt.Errorf("list services for env: %w", err)
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	picked := map[string]*v1.Service{}
	for _, s := range all {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		switch {
		case s.Namespace == pod.Namespace && links:
			picked[s.Name] = s
		case s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes":
			// A Service named kubernetes in the pod's own namespace takes the name, as with the kubelet.
			if _, taken := picked[s.Name]; !taken {
				picked[s.Name] = s
			}
		}
	}
	vals := map[string]string{}
	for _, s := range picked {
		serviceLinkVars(s, vals)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, vals, nil
}

// serviceLinkVars adds one Service's variables: NAME_SERVICE_HOST and NAME_SERVICE_PORT (the first
// port), NAME_SERVICE_PORT_<PORTNAME> for named ports, and Docker's link variables NAME_PORT and
// NAME_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}.
func serviceLinkVars(s *v1.Service, out map[string]string) {
	prefix := envVarName(s.Name)
	ip := s.Spec.ClusterIP
	out[prefix+"_SERVICE_HOST"] = ip
	out[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
	for i, p := range s.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		if p.Name != "" {
			out[prefix+"_SERVICE_PORT_"+envVarName(p.Name)] = port
		}
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(v1.ProtocolTCP)
		}
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			out[prefix+"_PORT"] = url
		}
		pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		out[pp] = url
		out[pp+"_PROTO"] = strings.ToLower(proto)
		out[pp+"_PORT"] = port
		out[pp+"_ADDR"] = ip
	}
}

// envVarName turns a DNS label (a Service or port name) into the variable prefix Docker links use.
func envVarName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
