package workqueue

import (
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// apiUnreachable reports whether err says that the API server could not be
// reached or could not answer for now: a refused, reset or timed-out
// connection, or the server saying it is unavailable, timing out or
// throttling. Such a failure is not the key's fault, so it must not grow
// the key's backoff: after an outage of a minute the keys would otherwise
// wait up to MaxDelay before trying again, long after the server is back.
func apiUnreachable(err error) bool {
	if err == nil {
		return false
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) {
		return true
	}
	if netErr, ok := errors.AsType[net.Error](err); ok && netErr.Timeout() {
		return true
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
}
