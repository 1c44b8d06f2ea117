package config

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
			got, err := LogSizeMax(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}
