package cri

import (
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// GetContainerEvents streams lifecycle events until the client goes away.
func (s *RuntimeService) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	events, unsubscribe := s.eng.SubscribeEvents()
	defer unsubscribe()
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("event stream closed (the subscriber fell behind or the runtime is stopping): %w", errdefs.ErrResourceExhausted)
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}
