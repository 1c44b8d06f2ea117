package fakecri

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *Server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fakecri", RuntimeVersion: "0.0.1", RuntimeApiVersion: "v1"}, nil
}

func (s *Server) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cgroupDriver == nil {
		return nil, status.Error(codes.Unimplemented, "RuntimeConfig")
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: *s.cgroupDriver}}, nil
}

func (s *Server) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ready := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: !s.notReady}
	if s.notReady {
		ready.Reason, ready.Message = "FakeDown", "the fake runtime was told to be down"
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		ready, {Type: runtimeapi.NetworkReady, Status: true}}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: ""}, {Name: "fake", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}}}}, nil
}

func (s *Server) RunPodSandbox(_ context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := r.Config
	s.record("RunPodSandbox %s", cfg.GetMetadata().GetName())
	if r.RuntimeHandler != "" {
		s.record("handler %s", r.RuntimeHandler)
	}
	id := s.id("sb")
	netMode := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork()
	st := &runtimeapi.PodSandboxStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: s.stamp(),
		Labels: cfg.Labels, Annotations: cfg.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: netMode}}},
	}
	if netMode != runtimeapi.NamespaceMode_NODE {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0." + id[len(id)-2:]}
	}
	s.sandboxes[id] = st
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (s *Server) StopPodSandbox(_ context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	s.mu.Lock()
	s.record("StopPodSandbox %s", r.PodSandboxId)
	sb, ok := s.sandboxes[r.PodSandboxId]
	if ok {
		sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	s.mu.Unlock()
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (s *Server) RemovePodSandbox(_ context.Context, r *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("RemovePodSandbox %s", r.PodSandboxId)
	delete(s.sandboxes, r.PodSandboxId)
	for cid, sid := range s.sandboxOf {
		if sid == r.PodSandboxId {
			delete(s.containers, cid)
			delete(s.configs, cid)
			delete(s.sandboxOf, cid)
			s.emit(cid, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
		}
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (s *Server) PodSandboxStatus(_ context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[r.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", r.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: proto.Clone(sb).(*runtimeapi.PodSandboxStatus)}, nil
}

func (s *Server) ListPodSandbox(_ context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, sb := range s.sandboxes {
		if f := r.Filter; f != nil {
			if f.Id != "" && f.Id != sb.Id || !labelsMatch(f.LabelSelector, sb.Labels) {
				continue
			}
			if f.State != nil && f.State.State != sb.State {
				continue
			}
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{Id: sb.Id, Metadata: sb.Metadata, State: sb.State,
			CreatedAt: sb.CreatedAt, Labels: sb.Labels, Annotations: sb.Annotations})
	}
	return resp, nil
}

func (s *Server) CreateContainer(_ context.Context, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := r.Config
	s.record("CreateContainer %s/%s", r.SandboxConfig.GetMetadata().GetName(), cfg.GetMetadata().GetName())
	sb, ok := s.sandboxes[r.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", r.PodSandboxId)
	}
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready", sb.Id)
	}
	id := s.id("c")
	s.containers[id] = &runtimeapi.ContainerStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: s.stamp(),
		Image: cfg.Image, ImageRef: cfg.Image.GetImage(), ImageId: s.imageID(cfg.Image.GetImage()),
		Labels: cfg.Labels, Annotations: cfg.Annotations, LogPath: cfg.LogPath,
	}
	if l := cfg.GetLinux().GetResources(); l != nil {
		s.containers[id].Resources = &runtimeapi.ContainerResources{Linux: proto.Clone(l).(*runtimeapi.LinuxContainerResources)}
	}
	s.sandboxOf[id] = r.PodSandboxId
	s.configs[id] = proto.Clone(cfg).(*runtimeapi.ContainerConfig)
	s.emit(id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (s *Server) StartContainer(_ context.Context, r *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[r.ContainerId]
	if !ok {
		return nil, notFound("container", r.ContainerId)
	}
	s.record("StartContainer %s", c.Metadata.Name)
	if err := s.startErrs[c.Metadata.Name]; err != nil {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode = 128
		c.FinishedAt = s.now().UnixNano()
		return nil, status.Error(codes.Unknown, err.Error())
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = s.now().UnixNano()
	s.emit(c.Id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return &runtimeapi.StartContainerResponse{}, nil
}

func (s *Server) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	s.mu.Lock()
	c, ok := s.containers[r.ContainerId]
	var hold chan struct{}
	if ok {
		s.record("StopContainer %s timeout=%d", c.Metadata.Name, r.Timeout)
		hold = s.stopHolds[c.Metadata.Name]
	}
	code := s.exitOnStop
	s.mu.Unlock()
	if !ok {
		return nil, notFound("container", r.ContainerId)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.ExitContainer(r.ContainerId, code)
	return &runtimeapi.StopContainerResponse{}, nil
}

func (s *Server) RemoveContainer(_ context.Context, r *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.containers[r.ContainerId]; ok {
		s.record("RemoveContainer %s", c.Metadata.Name)
		s.emit(r.ContainerId, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	}
	delete(s.containers, r.ContainerId)
	delete(s.configs, r.ContainerId)
	delete(s.sandboxOf, r.ContainerId)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (s *Server) ListContainers(_ context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &runtimeapi.ListContainersResponse{}
	for _, c := range s.containers {
		if f := r.Filter; f != nil {
			if f.Id != "" && f.Id != c.Id || !labelsMatch(f.LabelSelector, c.Labels) {
				continue
			}
			if f.PodSandboxId != "" && s.sandboxOf[c.Id] != f.PodSandboxId {
				continue
			}
			if f.State != nil && f.State.State != c.State {
				continue
			}
		}
		resp.Containers = append(resp.Containers, &runtimeapi.Container{Id: c.Id, PodSandboxId: s.sandboxOf[c.Id],
			Metadata: c.Metadata, Image: c.Image, ImageRef: c.ImageRef, State: c.State, CreatedAt: c.CreatedAt,
			Labels: c.Labels, Annotations: c.Annotations})
	}
	return resp, nil
}

func (s *Server) ContainerStatus(_ context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[r.ContainerId]
	if !ok {
		return nil, notFound("container", r.ContainerId)
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(c).(*runtimeapi.ContainerStatus)}, nil
}

func (s *Server) ExecSync(_ context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[r.ContainerId]
	if !ok {
		return nil, notFound("container", r.ContainerId)
	}
	s.record("ExecSync %s %v", c.Metadata.Name, r.Cmd)
	return &runtimeapi.ExecSyncResponse{ExitCode: s.execExit}, nil
}

func (s *Server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	s.mu.Lock()
	if s.noEvents {
		s.mu.Unlock()
		return status.Error(codes.Unimplemented, "events disabled")
	}
	ch := make(chan *runtimeapi.ContainerEventResponse, 1024)
	s.subs = append(s.subs, ch)
	s.mu.Unlock()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return status.Error(codes.Unavailable, "event stream closed")
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (s *Server) ImageStatus(_ context.Context, r *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := r.Image.GetImage()
	id := s.imageID(ref)
	if id == "" {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	img := &runtimeapi.Image{Id: id, Size: 1}
	for name, i := range s.images {
		if i == id {
			img.RepoTags = append(img.RepoTags, name)
			user, _, _ := strings.Cut(s.imageUsers[name], ":")
			if uid, err := strconv.ParseInt(user, 10, 64); err == nil {
				img.Uid = &runtimeapi.Int64Value{Value: uid}
			} else {
				img.Username = user
			}
		}
	}
	return &runtimeapi.ImageStatusResponse{Image: img}, nil
}

func (s *Server) PullImage(_ context.Context, r *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := r.Image.GetImage()
	s.record("PullImage %s", name)
	if user, ok := s.needAuth[name]; ok && r.GetAuth().GetUsername() != user {
		return nil, status.Errorf(codes.Unauthenticated, "pull %s: authentication required", name)
	}
	if err := s.pullErrs[name]; err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if _, ok := s.images[name]; !ok {
		s.images[name] = "sha256:" + time.Now().Format("150405.000000000")
	}
	return &runtimeapi.PullImageResponse{ImageRef: s.images[name]}, nil
}

func (s *Server) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &runtimeapi.ListImagesResponse{}
	for name, id := range s.images {
		resp.Images = append(resp.Images, &runtimeapi.Image{Id: id, RepoTags: []string{name}})
	}
	return resp, nil
}

// imageID accepts a name or an ID, as CreateContainer does.
func (s *Server) imageID(ref string) string {
	if id, ok := s.images[ref]; ok {
		return id
	}
	for _, id := range s.images {
		if id == ref {
			return id
		}
	}
	return ""
}

func (s *Server) UpdateRuntimeConfig(_ context.Context, r *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("UpdateRuntimeConfig %s", r.GetRuntimeConfig().GetNetworkConfig().GetPodCidr())
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// UpdatePodSandboxResources records "UpdatePodSandboxResources <id> cpu=<shares>/<quota>
// mem=<limit> overhead cpu=<shares>/<quota> mem=<limit>"; FailSandboxUpdate makes it fail.
func (s *Server) UpdatePodSandboxResources(_ context.Context, r *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, over := r.GetResources(), r.GetOverhead()
	s.record("UpdatePodSandboxResources %s cpu=%d/%d mem=%d overhead cpu=%d/%d mem=%d", r.GetPodSandboxId(),
		res.GetCpuShares(), res.GetCpuQuota(), res.GetMemoryLimitInBytes(),
		over.GetCpuShares(), over.GetCpuQuota(), over.GetMemoryLimitInBytes())
	if s.sandboxErr != nil {
		return nil, s.sandboxErr
	}
	if _, ok := s.sandboxes[r.GetPodSandboxId()]; !ok {
		return nil, notFound("sandbox", r.GetPodSandboxId())
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// UpdateContainerResources merges the fields set into what the container reports, as runtimes
// do: an update names only what it changes. It records "UpdateContainerResources <id> <name>
// cpu=<shares>/<quota> mem=<limit> cpuset=<cpus>"; FailUpdate makes it fail.
func (s *Server) UpdateContainerResources(_ context.Context, r *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[r.GetContainerId()]
	if !ok {
		s.record("UpdateContainerResources %s cpuset=%s", r.GetContainerId(), r.GetLinux().GetCpusetCpus())
		return nil, notFound("container", r.GetContainerId())
	}
	l := r.GetLinux()
	s.record("UpdateContainerResources %s %s cpu=%d/%d mem=%d cpuset=%s", c.Id, c.Metadata.GetName(),
		l.GetCpuShares(), l.GetCpuQuota(), l.GetMemoryLimitInBytes(), l.GetCpusetCpus())
	if err := s.updateErrs[c.Metadata.GetName()]; err != nil {
		return nil, status.Error(codes.Unknown, err.Error())
	}
	if c.Resources == nil {
		c.Resources = &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{}}
		if cfg := s.configs[c.Id]; cfg.GetLinux().GetResources() != nil {
			c.Resources.Linux = proto.Clone(cfg.Linux.Resources).(*runtimeapi.LinuxContainerResources)
		}
	}
	if r.GetLinux() != nil {
		proto.Merge(c.Resources.Linux, r.Linux)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}
