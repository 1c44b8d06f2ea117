package csi

import (
	"context"
	"encoding/json"
	"errors"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// TokenFunc asks the API for a token of the pod's service account, bound to the pod, for one
// audience ("" is the API server's own), as the kubelet's token manager does (cached, renewed
// before it expires).
type TokenFunc func(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds *int64) (authenticationv1.TokenRequestStatus, error)

// podTokens are the tokens a driver's CSIDriver asks for (tokenRequests), in the volume context
// key the kubelet uses: a JSON map from audience to the token and its expiry.
func (m *Manager) podTokens(ctx context.Context, pod *v1.Pod, requests []storagev1.TokenRequest) (map[string]string, error) {
	if m.cfg.Token == nil {
		return nil, errors.New(logf("the driver asks for service account tokens, which need an API server"))
	}
	out := map[string]authenticationv1.TokenRequestStatus{}
	for _, r := range requests {
		st, err := m.cfg.Token(ctx, pod, r.Audience, r.ExpirationSeconds)
		if err != nil {
			// The kubelet's words, its misspelling kept so that searches for it find this.
			return nil, errors.New(logf("mounter.SetUpAt failed to get service accoount token attributes: %v", err))
		}
		out[r.Audience] = st
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return map[string]string{"csi.storage.k8s.io/serviceAccount.tokens": string(b)}, nil
}
