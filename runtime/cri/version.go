package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/version"
)

// criVersion is the CRI API version this runtime speaks.
const criVersion = "v1"

func (s *RuntimeService) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       "nodelet",
		RuntimeVersion:    version.Version,
		RuntimeApiVersion: criVersion,
	}, nil
}
