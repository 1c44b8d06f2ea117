// Command healthserver serves the standard gRPC health service on 127.0.0.1:<port> inside test
// containers: SERVING until the file /tmp/unhealthy exists. The managers' end-to-end tests put it in
// an image to probe with a grpc probe.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

type server struct {
	healthpb.UnimplementedHealthServer
}

func (server) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if _, err := os.Stat("/tmp/unhealthy"); err == nil {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func main() {
	addr := flag.String("listen", "127.0.0.1:9090", "address")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, server{})
	log.Fatal(s.Serve(l))
}
