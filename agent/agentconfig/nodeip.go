package agentconfig

import (
	"bufio"
	"net"
	"os"
	"strings"
)

// detectNodeIP picks the node's address without any DNS lookup (a resolver that drops a query
// costs the upstream kubelet 5 s per sync here): the first global IPv4 address of the interface
// holding the default route, else of any interface that is up. "" when there is none.
func detectNodeIP() string {
	if iface := defaultRouteInterface(); iface != "" {
		if ip := firstGlobalIPv4(iface); ip != "" {
			return ip
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagUp != 0 && i.Flags&net.FlagLoopback == 0 {
			if ip := firstGlobalIPv4(i.Name); ip != "" {
				return ip
			}
		}
	}
	return ""
}

func defaultRouteInterface() string {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 2 && fields[1] == "00000000" && fields[0] != "Iface" {
			return fields[0]
		}
	}
	return ""
}

func firstGlobalIPv4(name string) string {
	i, err := net.InterfaceByName(name)
	if err != nil {
		return ""
	}
	addrs, err := i.Addrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
