package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// tcpListen is the socket state LISTEN as /proc/net/tcp prints it.
const tcpListen = "0A"

// TCPListening reports whether the /proc/net/tcp (or tcp6) table holds a socket listening on port.
// Tests read the table from inside a pod (cat through ExecSync) to learn that a server there is
// ready before connecting: a refused first connection ends a port-forward session.
func TCPListening(table []byte, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		// "sl local_address rem_address st ...", addresses as HEXIP:HEXPORT.
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] == "sl" {
			continue
		}
		if strings.HasSuffix(f[1], want) && f[3] == tcpListen {
			return true
		}
	}
	return false
}
