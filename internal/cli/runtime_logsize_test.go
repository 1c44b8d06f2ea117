package cli

import "testing"

func TestLogMaxSize(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{name: "default", in: "1Gi", want: 1 << 30},
		{name: "plain bytes", in: "65536", want: 65536},
		{name: "zero is no limit", in: "0", want: 0},
		{name: "minus one is no limit", in: "-1", want: 0},
		{name: "other negative", in: "-5Mi", wantErr: true},
		{name: "not a size", in: "lots", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := logMaxSize(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRuntimeAndUpHaveLogSizeMax(t *testing.T) {
	for _, cmd := range []string{"runtime", "up"} {
		t.Run(cmd, func(t *testing.T) {
			c := newRuntimeCmd()
			if cmd == "up" {
				c = newUpCmd()
			}
			f := c.Flags().Lookup("log-size-max")
			if f == nil || f.DefValue != "1Gi" {
				t.Fatalf("--log-size-max: %+v", f)
			}
		})
	}
}
