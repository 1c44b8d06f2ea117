package prober

import (
	"bytes"
	"fmt"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// TestHealthCodecAsGenerated: the hand-coded health messages are the generated package's bytes.
func TestHealthCodecAsGenerated(t *testing.T) {
	for _, service := range []string{"", "up", "a.b.Service"} {
		got, err := healthCodec{}.Marshal(&healthRequest{service: service})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(&healthpb.HealthCheckRequest{Service: service})
		if !bytes.Equal(got.Materialize(), want) {
			t.Errorf("request %q: % x, generated % x", service, got.Materialize(), want)
		}
	}
	for s := range healthpb.HealthCheckResponse_ServingStatus_name {
		b, _ := proto.Marshal(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_ServingStatus(s)})
		b = append(b, 0x12, 0x01, 'x') // a field of a later version, skipped
		var r healthResponse
		if err := (healthCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &r); err != nil {
			t.Fatal(err)
		}
		status := healthpb.HealthCheckResponse_ServingStatus(s)
		if r.status != uint64(s) || fmt.Sprintf("%q", r.statusName()) != fmt.Sprintf("%q", status) {
			t.Errorf("status %v: got %d %q", status, r.status, r.statusName())
		}
	}
}
