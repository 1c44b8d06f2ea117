package testutil

import "testing"

func TestTCPListening(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0016 0100007F:1F91 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
`
	const table6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
`
	tests := []struct {
		name  string
		table string
		port  int
		want  bool
	}{
		{name: "listening v4", table: table, port: 8080, want: true},
		{name: "established is not listening", table: table, port: 22, want: false},
		{name: "remote port does not count", table: table, port: 8081, want: false},
		{name: "absent", table: table, port: 9090, want: false},
		{name: "listening v6", table: table6, port: 80, want: true},
		{name: "empty", table: "", port: 80, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TCPListening([]byte(tc.table), tc.port); got != tc.want {
				t.Fatalf("TCPListening(%d) = %v, want %v", tc.port, got, tc.want)
			}
		})
	}
}
