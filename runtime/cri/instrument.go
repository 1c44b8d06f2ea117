package cri

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// NewGRPCServer returns a gRPC server whose every call, of the RuntimeService and the
// ImageService alike, goes through one wrapper: panics become Internal errors instead of killing the
// daemon (and with it the view of every pod), errdefs sentinels become gRPC codes, and each call is
// logged with its duration.
func NewGRPCServer(log *slog.Logger, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts,
		grpc.ChainUnaryInterceptor(unaryInstrument(log)),
		grpc.ChainStreamInterceptor(streamInstrument(log)),
		grpc.MaxRecvMsgSize(16<<20),
		grpc.MaxSendMsgSize(16<<20),
	)
	return grpc.NewServer(opts...)
}

func unaryInstrument(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in CRI call", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, fmt.Sprintf("internal error: %v", r))
			}
			err = errdefs.ToGRPC(err)
			level := slog.LevelDebug
			if err != nil && status.Code(err) != codes.NotFound {
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "cri", "method", info.FullMethod, "duration", time.Since(start), "err", err)
		}()
		return handler(ctx, req)
	}
}

func streamInstrument(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in CRI stream", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, fmt.Sprintf("internal error: %v", r))
			}
			err = errdefs.ToGRPC(err)
		}()
		return handler(srv, ss)
	}
}
