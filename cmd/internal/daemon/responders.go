package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/contentenc"
	"github.com/ctxgraph/ctxgraph/session"
)

// ErrorBody is the JSON error every API answers with, over NATS and HTTP.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorBody classifies err into a status code and a body.
func errorBody(err error) (int, []byte) {
	var body ErrorBody
	status := http.StatusInternalServerError
	body.Error.Code = "internal"
	if s, code, ok := errorStatus(err); ok {
		status, body.Error.Code = s, code
	}
	switch {
	case errors.Is(err, planner.ErrInvalid), errors.Is(err, session.ErrInvalid), errors.Is(err, particle.ErrInvalid), errors.Is(err, errBadRequest):
		status, body.Error.Code = http.StatusBadRequest, "invalid_request"
	case errors.Is(err, particle.ErrNotFound), errors.Is(err, session.ErrNotFound), errors.Is(err, errNotFound):
		status, body.Error.Code = http.StatusNotFound, "not_found"
	case errors.Is(err, errTooLarge):
		status, body.Error.Code = http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, context.DeadlineExceeded):
		status, body.Error.Code = http.StatusGatewayTimeout, "timeout"
	case errors.Is(err, particle.ErrClosed):
		status, body.Error.Code = http.StatusServiceUnavailable, "unavailable"
	}
	body.Error.Message = err.Error()
	b, _ := json.Marshal(body)
	return status, b
}

var (
	errBadRequest = errors.New("bad request")
	errNotFound   = errors.New("not found")
	errTooLarge   = errors.New("request too large")
)

// maxRequestBytes bounds planner and session request bodies.
const maxRequestBytes = 1 << 20

// extraResponders are NATS request/reply handlers that files of this
// package register in init (policy edits, ...).
var extraResponders []func(d *Daemon) error

// requestQueue is how many requests wait for a free worker before NATS
// reports the daemon a slow consumer and drops what comes next.
const requestQueue = 8192

// startResponders subscribes the request/reply subjects. Their requests
// go into one channel that 2×GOMAXPROCS workers take from: the NATS
// connection's reader hands a request straight to a waiting worker (an
// asynchronous subscription's own goroutine, and a goroutine started per
// request behind it, were two hand-offs where this is one), and no more
// requests run at once however many arrive.
func (d *Daemon) startResponders() error {
	p := d.cfg.Prefix()
	subs := []struct {
		subj string
		fn   func(context.Context, *nats.Msg)
	}{
		{p + ".planner.context", d.onPlannerRequest},
		{p + ".session.*.create", d.onSession},
		{p + ".session.*.get", d.onSession},
		{p + ".session.*.update", d.onSession},
	}
	requests := make(chan *nats.Msg, requestQueue)
	handlers := make(map[*nats.Subscription]nats.MsgHandler, len(subs))
	for _, s := range subs {
		sub, err := d.nc.ChanQueueSubscribe(s.subj, "ctxgraph", requests)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", s.subj, err)
		}
		handlers[sub] = d.guardNATS(s.fn)
		d.respSubs = append(d.respSubs, sub)
	}
	d.reqDone = make(chan struct{})
	for range 2 * runtime.GOMAXPROCS(0) {
		d.reqWG.Add(1)
		go func() {
			defer d.reqWG.Done()
			d.serveRequests(requests, handlers)
		}()
	}
	for _, add := range extraResponders {
		if err := add(d); err != nil {
			return err
		}
	}
	// Push: every session change goes to <prefix>.session.<id>.context.
	d.sessions.OnChange(func(s *session.Session) {
		b, err := json.Marshal(s)
		if err != nil {
			return
		}
		_ = d.nc.Publish(fmt.Sprintf("%s.session.%s.context", p, s.ID), b)
	})
	// The subscriptions reach the server asynchronously: wait for it to
	// have them, so that a daemon that says it serves has responders (a
	// client's first request could otherwise find none).
	if err := d.nc.Flush(); err != nil {
		return fmt.Errorf("register responders: %w", err)
	}
	return nil
}

// stopResponders stops the request subscriptions and waits for the
// workers to answer every request the server sent before: a drain (the
// server is told to stop, and a round trip later everything it sent
// before is in the queue) rather than an unsubscribe, which drops what is
// still on its way.
func (d *Daemon) stopResponders() {
	for _, sub := range d.respSubs {
		_ = sub.Drain()
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, sub := range d.respSubs {
		for sub.IsValid() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	if d.reqDone != nil {
		close(d.reqDone)
	}
	d.reqWG.Wait()
}

// serveRequests is one responder worker: it answers requests until
// reqDone is closed, then those already queued, and returns.
func (d *Daemon) serveRequests(requests <-chan *nats.Msg, handlers map[*nats.Subscription]nats.MsgHandler) {
	serve := func(m *nats.Msg) {
		if h := handlers[m.Sub]; h != nil {
			h(m)
		}
	}
	for {
		select {
		case m := <-requests:
			serve(m)
		case <-d.reqDone:
			for {
				select {
				case m := <-requests:
					serve(m)
				default:
					return
				}
			}
		}
	}
}

func (d *Daemon) respond(m *nats.Msg, v any, err error) {
	if m.Reply == "" {
		return
	}
	var body []byte
	if err != nil {
		var status int
		status, body = errorBody(err)
		out := nats.NewMsg(m.Reply)
		out.Data = body
		out.Header.Set("Status", fmt.Sprint(status))
		var rl *rateLimitedError
		if errors.As(err, &rl) {
			out.Header.Set("Retry-After", retryAfter(rl.retry))
		}
		_ = m.RespondMsg(out)
		return
	}
	if raw, ok := v.([]byte); ok {
		body = raw
	} else if body, err = json.Marshal(v); err != nil {
		d.respond(m, nil, err)
		return
	}
	_ = m.Respond(body)
}

// respondCoded replies to m with body, written in coding (named in the
// reply's Content-Encoding header).
func (d *Daemon) respondCoded(m *nats.Msg, body []byte, coding string) {
	if m.Reply == "" {
		return
	}
	out := &nats.Msg{Subject: m.Reply, Data: body, Header: nats.Header{contentenc.ContentHeader: {coding}}}
	_ = m.RespondMsg(out)
}

// encodeReply returns a planner answer's body in the first content
// coding accept asks for that contentenc writes, when the body is large
// enough to be worth it, with that coding ("": body as it is). release
// hands back the buffer the coded body lies in, once it is sent.
func encodeReply(body []byte, accept []string) (out []byte, coding string, release func(), err error) {
	release = func() {}
	if len(body) < contentenc.MinBytes {
		return body, "", release, nil
	}
	if coding = contentenc.Negotiate(accept...); coding == "" {
		return body, "", release, nil
	}
	buf := replyBufs.Get().(*[]byte)
	if out, err = contentenc.Append((*buf)[:0], body, coding); err != nil {
		replyBufs.Put(buf)
		return nil, "", release, err
	}
	*buf = out
	return out, coding, func() { replyBufs.Put(buf) }, nil
}

// acceptedCodings returns the Accept-Encoding values of a request's
// headers, whatever the case of the header's name (NATS headers are
// case-sensitive; HTTP clients write it in several).
func acceptedCodings(h nats.Header) []string {
	if v := h[contentenc.AcceptHeader]; v != nil {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, contentenc.AcceptHeader) {
			return v
		}
	}
	return nil
}

// replyBufs holds reply buffers between planner requests: a JSON answer
// is ~130 KB (msgpack ~45 KB), and m.Respond copies the body into the
// connection's write buffer, so the buffer is free once it returns.
var replyBufs = sync.Pool{New: func() any { return new([]byte) }}

// answers holds planner answers between requests: each is rendered and
// then let go, so its lists are reused (planner.PlanInto) rather than
// allocated anew, about 60 KB a request that the collector would
// otherwise have to catch up with.
var answers = sync.Pool{New: func() any { return new(planner.Answer) }}

// putAnswer empties ans and hands it back to answers.
func putAnswer(ans *planner.Answer) {
	ans.Reset()
	answers.Put(ans)
}

func (d *Daemon) onPlannerRequest(ctx context.Context, m *nats.Msg) {
	ans := answers.Get().(*planner.Answer)
	defer putAnswer(ans)
	format, err := d.planAnswer(ctx, natsCallerOf(ctx), m.Data, ans)
	if err != nil {
		d.respond(m, nil, err)
		return
	}
	buf := replyBufs.Get().(*[]byte)
	defer replyBufs.Put(buf)
	t0 := time.Now()
	body, _, err := planner.Append((*buf)[:0], ans, format)
	if err == nil {
		*buf = body
	}
	coding := ""
	if err == nil {
		var release func()
		body, coding, release, err = encodeReply(body, acceptedCodings(m.Header))
		defer release()
	}
	t1 := time.Now()
	if coding != "" && err == nil {
		d.respondCoded(m, body, coding)
	} else {
		d.respond(m, body, err)
	}
	encode, respond := t1.Sub(t0), time.Since(t1)
	d.replies.add(encode, respond)
	if err == nil {
		d.metrics.observeReply(encode, respond, coding, len(body))
	}
}

// plan decodes, answers and renders one planner request.
// c is the caller: with auth on, its principal replaces the roles and
// agent the request names.
// It returns the rendered answer and its media type (the request's
// format: JSON unless it asks for triples, cypher, turtle or text).
func (d *Daemon) plan(ctx context.Context, c caller, data []byte) ([]byte, string, error) {
	ans := answers.Get().(*planner.Answer)
	defer putAnswer(ans)
	format, err := d.planAnswer(ctx, c, data, ans)
	if err != nil {
		return nil, "", err
	}
	t := time.Now()
	body, ctype, err := planner.Render(ans, format)
	d.metrics.observeEncode(time.Since(t))
	return body, ctype, err
}

// planAnswer decodes and answers one planner request into ans; it
// returns the format the request asks for.
func (d *Daemon) planAnswer(ctx context.Context, c caller, data []byte, ans *planner.Answer) (string, error) {
	start := time.Now()
	if len(data) > maxRequestBytes {
		return "", fmt.Errorf("%w: %d bytes (limit %d)", errTooLarge, len(data), maxRequestBytes)
	}
	req, err := planner.DecodeRequest(data)
	if err != nil {
		d.metrics.plannerRequests.WithLabelValues("invalid").Inc()
		return "", err
	}
	c.authorize(req)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.planner.PlanInto(ctx, req, ans); err != nil {
		d.metrics.plannerRequests.WithLabelValues("error").Inc()
		return "", err
	}
	if len(ans.Unknowns) > 0 {
		d.recordHiddenUnknowns(ctx, c, req, ans)
	}
	d.metrics.observePlan(ans, time.Since(start))
	d.metrics.plannerRequests.WithLabelValues("ok").Inc()
	return req.Format, nil
}

// authorize makes an authenticated caller the request's principal: its
// roles and agent replace whatever the body names.
func (c caller) authorize(req *planner.Request) {
	if c.Authenticated {
		p := c.Principal
		req.Principal, req.Roles = &p, p.Roles
		if p.Agent != "" {
			req.Agent = p.Agent
		}
	}
}

// sessionRequest is the body of a session request over NATS.
type sessionRequest struct {
	Tenant  string           `json:"tenant,omitempty"`
	Project string           `json:"project,omitempty"`
	Session *session.Session `json:"session,omitempty"`
	Patch   *session.Patch   `json:"patch,omitempty"`
}

func (d *Daemon) onSession(ctx context.Context, m *nats.Msg) {
	// <prefix>.session.<id>.<op>
	parts := strings.Split(strings.TrimPrefix(m.Subject, d.cfg.Prefix()+"."), ".")
	if len(parts) != 3 {
		d.respond(m, nil, fmt.Errorf("%w: subject %s", errBadRequest, m.Subject))
		return
	}
	id, op := parts[1], parts[2]
	var req sessionRequest
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &req); err != nil {
			d.respond(m, nil, fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err))
			return
		}
	}
	ns, err := requestNamespace(req.Tenant, req.Project)
	if err != nil {
		d.respond(m, nil, err)
		return
	}
	var s *session.Session
	switch op {
	case "create":
		in := session.Session{}
		if req.Session != nil {
			in = *req.Session
		}
		in.ID, in.Namespace = id, ns
		s, err = d.sessions.Create(ctx, in)
	case "get":
		s, err = d.sessions.Get(ctx, ns, id)
	case "update":
		if req.Patch == nil {
			err = fmt.Errorf("%w: update needs a patch", errBadRequest)
			break
		}
		s, err = d.sessions.Update(ctx, ns, id, *req.Patch)
	}
	d.respond(m, s, err)
}
