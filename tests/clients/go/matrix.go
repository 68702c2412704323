// Client-matrix program for nats.go (Debian's golang-github-nats-io-go-nats-dev).
// The contract (environment, CONTROL lines, RESULT lines, features) is in ../README.md.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ---------------------------------------------------------------------------
// plumbing

func env(name string) string { return os.Getenv(name) }

func logf(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "[go] "+format+"\n", a...)
}

// obs renders an observation as compact JSON (maps have sorted keys).
func obs(v interface{}) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return strings.TrimRight(buf.String(), "\n")
}

// errKind names an error without its volatile parts.
func errKind(err error) string {
	if err == nil {
		return "none"
	}
	switch {
	case errors.Is(err, nats.ErrAuthorization):
		return "authorization_violation"
	case errors.Is(err, nats.ErrAuthExpired):
		return "auth_expired"
	case errors.Is(err, nats.ErrNoResponders):
		return "no_responders"
	case errors.Is(err, nats.ErrTimeout):
		return "timeout"
	case errors.Is(err, nats.ErrKeyNotFound):
		return "key_not_found"
	case errors.Is(err, nats.ErrNoKeysFound):
		return "no_keys_found"
	case errors.Is(err, nats.ErrObjectNotFound):
		return "object_not_found"
	case errors.Is(err, nats.ErrNoObjectsFound):
		return "no_objects_found"
	case errors.Is(err, nats.ErrConnectionClosed):
		return "connection_closed"
	case errors.Is(err, nats.ErrNoServers):
		return "no_servers"
	}
	var je nats.JetStreamError
	if errors.As(err, &je) && je.APIError() != nil {
		a := je.APIError()
		return fmt.Sprintf("api_error:%d/%d", a.Code, a.ErrorCode)
	}
	return "error:" + err.Error()
}

type failure struct{ what string }

func (f failure) Error() string { return f.what }

// check turns an unexpected error into a failure that names the step.
func check(step string, err error) {
	if err != nil {
		panic(failure{step + ": " + errKind(err)})
	}
}

// expect fails the feature when cond is false.
func expect(cond bool, format string, a ...interface{}) {
	if !cond {
		panic(failure{fmt.Sprintf(format, a...)})
	}
}

var outMu sync.Mutex

func emit(line string) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintln(os.Stdout, line)
	os.Stdout.Sync()
}

// The whole program stays under the contract's 120 s: a feature's timeout is cut to
// what is left of this budget, and once it is spent the remaining features fail at once.
var (
	programStart = time.Now()
	budget       = 110 * time.Second
)

// feature runs fn with its own timeout and always prints exactly one RESULT line.
// fn returns the observation; a panic(failure) or an error makes it "fail".
func feature(name string, timeout time.Duration, fn func() interface{}) {
	left := budget - time.Since(programStart)
	if left < time.Second {
		emit(fmt.Sprintf("RESULT %s fail %s", name, obs(map[string]string{"error": "program time budget spent"})))
		return
	}
	if timeout > left {
		timeout = left
	}
	type outcome struct {
		status, observation string
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(failure); ok {
					done <- outcome{"fail", obs(map[string]string{"error": f.what})}
				} else {
					done <- outcome{"fail", obs(map[string]string{"panic": fmt.Sprint(r)})}
				}
			}
		}()
		o := fn()
		if s, ok := o.(skipped); ok {
			done <- outcome{"skip", obs(map[string]string{"reason": string(s)})}
			return
		}
		done <- outcome{"ok", obs(o)}
	}()
	var res outcome
	select {
	case res = <-done:
	case <-time.After(timeout):
		res = outcome{"fail", obs(map[string]string{"error": "timeout"})}
	}
	logf("%s: %s in %v", name, res.status, time.Since(start).Round(time.Millisecond))
	emit(fmt.Sprintf("RESULT %s %s %s", name, res.status, res.observation))
}

type skipped string

// stdin lines (the runner's "done" replies to CONTROL requests)
var stdinLines = make(chan string, 4)

func readStdin() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		stdinLines <- strings.TrimSpace(sc.Text())
	}
	close(stdinLines)
}

func control(action string) {
	emit("CONTROL " + action)
	select {
	case line, ok := <-stdinLines:
		expect(ok, "stdin closed waiting for %s", action)
		expect(line == "done", "control %s answered %q", action, line)
	case <-time.After(20 * time.Second):
		panic(failure{"no answer to CONTROL " + action})
	}
}

// connection helpers ---------------------------------------------------------

func base(name string) []nats.Option {
	return []nats.Option{
		nats.Name("matrix-go-" + name),
		nats.Timeout(3 * time.Second),
	}
}

func connectMain(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append(base(name), nats.UserInfo(env("MATRIX_USER"), env("MATRIX_PASSWORD")))
	return nats.Connect(env("MATRIX_URL"), append(opts, extra...)...)
}

func mustMain(name string, extra ...nats.Option) *nats.Conn {
	nc, err := connectMain(name, extra...)
	check("connect", err)
	return nc
}

// roundTrip subscribes on subj, publishes payload and returns what came back.
func roundTrip(nc *nats.Conn, subj string, payload []byte) []byte {
	sub, err := nc.SubscribeSync(subj)
	check("subscribe", err)
	defer sub.Unsubscribe()
	check("flush", nc.Flush())
	check("publish", nc.Publish(subj, payload))
	m, err := sub.NextMsg(3 * time.Second)
	check("next message", err)
	return m.Data
}

// collect reads a sync subscription until it has been quiet for `quiet`.
func collect(sub *nats.Subscription, quiet time.Duration) []string {
	var got []string
	for {
		m, err := sub.NextMsg(quiet)
		if err != nil {
			return got
		}
		got = append(got, m.Subject+":"+string(m.Data))
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ---------------------------------------------------------------------------
// features

func connectUser() interface{} {
	nc := mustMain("user")
	defer nc.Close()
	got := roundTrip(nc, "core.user", []byte("hello user"))
	bad, err := nats.Connect(env("MATRIX_URL"), append(base("user-bad"),
		nats.UserInfo(env("MATRIX_USER"), "wrong-password"), nats.NoReconnect())...)
	if bad != nil {
		bad.Close()
	}
	expect(err != nil, "wrong password was accepted")
	return map[string]interface{}{"roundtrip": string(got), "wrong_password": errKind(err),
		"info": map[string]interface{}{"auth_required": nc.AuthRequired(), "tls_required": nc.TLSRequired(),
			"headers": nc.HeadersSupported(), "max_payload": nc.MaxPayload()}}
}

func connectToken() interface{} {
	nc, err := nats.Connect(env("MATRIX_TOKEN_URL"), append(base("token"), nats.Token(env("MATRIX_TOKEN")))...)
	check("connect", err)
	defer nc.Close()
	got := roundTrip(nc, "core.token", []byte("hello token"))
	bad, err := nats.Connect(env("MATRIX_TOKEN_URL"), append(base("token-bad"),
		nats.Token("not-the-token"), nats.NoReconnect())...)
	if bad != nil {
		bad.Close()
	}
	expect(err != nil, "wrong token was accepted")
	return map[string]string{"roundtrip": string(got), "wrong_token": errKind(err)}
}

func connectNkey() interface{} {
	opt, err := nats.NkeyOptionFromSeed(env("MATRIX_NKEY_SEED_FILE"))
	check("read seed", err)
	nc, err := nats.Connect(env("MATRIX_URL"), append(base("nkey"), opt)...)
	check("connect", err)
	defer nc.Close()
	got := roundTrip(nc, "core.nkey", []byte("hello nkey"))
	return map[string]string{"roundtrip": string(got)}
}

func connectCreds() interface{} {
	nc, err := nats.Connect(env("MATRIX_CREDS_URL"), append(base("creds"), nats.UserCredentials(env("MATRIX_CREDS_FILE")))...)
	check("connect", err)
	defer nc.Close()
	got := roundTrip(nc, "core.creds", []byte("hello creds"))
	return map[string]string{"roundtrip": string(got)}
}

func tlsFeature() interface{} {
	nc, err := nats.Connect(env("MATRIX_TLS_URL"), append(base("tls"), nats.RootCAs(env("MATRIX_TLS_CA")))...)
	check("connect", err)
	defer nc.Close()
	_, tlsErr := nc.TLSConnectionState()
	var sizes []map[string]interface{}
	for _, n := range []int{1, 10 * 1024, 500 * 1024} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte('a' + i%26)
		}
		got := roundTrip(nc, "core.tls", payload)
		sizes = append(sizes, map[string]interface{}{"sent": n, "got": len(got), "same": bytes.Equal(got, payload)})
	}
	return map[string]interface{}{"tls": tlsErr == nil, "max_payload": nc.MaxPayload(), "roundtrips": sizes}
}

func pubsubWildcard() interface{} {
	nc := mustMain("wildcard")
	defer nc.Close()
	patterns := []string{"m.*.x", "m.>", "m.a.x"}
	subs := map[string]*nats.Subscription{}
	for _, p := range patterns {
		s, err := nc.SubscribeSync(p)
		check("subscribe "+p, err)
		subs[p] = s
	}
	check("flush", nc.Flush())
	for i, subj := range []string{"m.a.x", "m.b.x", "m.a.y", "m.a.x.y", "m", "m.c.x", "n.a.x", "m.a.x"} {
		check("publish", nc.Publish(subj, []byte(fmt.Sprint(i))))
	}
	check("flush", nc.Flush())
	got := map[string][]string{}
	for _, p := range patterns {
		got[p] = collect(subs[p], 300*time.Millisecond)
	}
	return got
}

func queueGroup() interface{} {
	nc := mustMain("queue")
	defer nc.Close()
	var mu sync.Mutex
	perMember := make([]int, 3)
	seen := map[string]int{}
	plain := 0
	all := make(chan struct{})
	total := func() int { return perMember[0] + perMember[1] + perMember[2] }
	checkDone := func() {
		if plain == 30 && total() == 30 {
			close(all)
		}
	}
	for i := 0; i < 3; i++ {
		i := i
		_, err := nc.QueueSubscribe("core.queue", "workers", func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			perMember[i]++
			seen[string(m.Data)]++
			checkDone()
		})
		check("queue subscribe", err)
	}
	_, err := nc.Subscribe("core.queue", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		plain++
		checkDone()
	})
	check("subscribe", err)
	check("flush", nc.Flush())
	for i := 0; i < 30; i++ {
		check("publish", nc.Publish("core.queue", []byte(fmt.Sprint(i))))
	}
	check("flush", nc.Flush())
	select {
	case <-all:
	case <-time.After(5 * time.Second):
	}
	time.Sleep(200 * time.Millisecond) // anything extra would show now
	mu.Lock()
	defer mu.Unlock()
	once := len(seen) == 30
	for _, c := range seen {
		if c != 1 {
			once = false
		}
	}
	expect(once && plain == 30 && total() == 30, "queue total %d (distinct %d), plain %d", total(), len(seen), plain)
	return map[string]interface{}{"queue_total": total(), "each_once": once, "plain": plain}
}

func requestReplyHeaders() interface{} {
	nc := mustMain("reqrep")
	defer nc.Close()
	_, err := nc.Subscribe("core.service", func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		for k, vs := range m.Header {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		r.Header.Set("X-Responder", "go")
		r.Data = append([]byte("echo: "), m.Data...)
		m.RespondMsg(r)
	})
	check("subscribe", err)
	check("flush", nc.Flush())
	req := nats.NewMsg("core.service")
	req.Header.Set("X-Trace", "t-1")
	req.Header.Add("X-Multi", "one")
	req.Header.Add("X-Multi", "two")
	req.Data = []byte("ping")
	resp, err := nc.RequestMsg(req, 3*time.Second)
	check("request", err)
	return map[string]interface{}{"data": string(resp.Data), "headers": resp.Header}
}

func noResponders() interface{} {
	nc := mustMain("noresp")
	defer nc.Close()
	_, err := nc.Request("core.nobody.home", []byte("anyone?"), 3*time.Second)
	expect(errors.Is(err, nats.ErrNoResponders), "expected no responders, got %s", errKind(err))
	return map[string]string{"error": errKind(err)}
}

func drainFeature() interface{} {
	closed := make(chan struct{})
	nc := mustMain("drain", nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	var mu sync.Mutex
	handled := 0
	_, err := nc.Subscribe("core.drain", func(m *nats.Msg) {
		time.Sleep(time.Millisecond)
		mu.Lock()
		handled++
		mu.Unlock()
	})
	check("subscribe", err)
	for i := 0; i < 100; i++ {
		check("publish", nc.Publish("core.drain", []byte(fmt.Sprint(i))))
	}
	check("drain", nc.Drain())
	select {
	case <-closed:
	case <-time.After(8 * time.Second):
		panic(failure{"connection not closed after drain"})
	}
	mu.Lock()
	defer mu.Unlock()
	expect(handled == 100, "handled %d of 100", handled)
	return map[string]interface{}{"handled": handled, "closed": nc.IsClosed()}
}

func reconnect(action string) interface{} {
	reconnected := make(chan struct{}, 8)
	var mu sync.Mutex
	lameDuck := false
	disconnected := false
	opts := []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) {
			mu.Lock()
			disconnected = true
			mu.Unlock()
		}),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }),
		nats.LameDuckModeHandler(func(*nats.Conn) {
			mu.Lock()
			lameDuck = true
			mu.Unlock()
		}),
	}
	nc := mustMain("reconnect-"+action, opts...)
	defer nc.Close()
	subj := "core.reconnect." + action
	sub, err := nc.SubscribeSync(subj)
	check("subscribe", err)
	check("flush", nc.Flush())
	before := roundTrip(nc, subj+".before", []byte("before"))
	control(action)
	select {
	case <-reconnected:
	case <-time.After(4 * time.Second):
		panic(failure{"no reconnect within 4s of done"})
	}
	// a second connection, made after the restart, publishes to the old subscription
	pub := mustMain("reconnect-pub-" + action)
	defer pub.Close()
	check("flush", nc.Flush())
	check("publish", pub.Publish(subj, []byte("after "+action)))
	check("flush", pub.Flush())
	m, err := sub.NextMsg(5 * time.Second)
	check("message after "+action, err)
	mu.Lock()
	defer mu.Unlock()
	res := map[string]interface{}{
		"before":       string(before),
		"disconnected": disconnected,
		"reconnected":  true,
		"got":          string(m.Data),
	}
	if action == "lameduck" {
		res["lame_duck_reported"] = lameDuck
	}
	return res
}

func ackObs(a *nats.PubAck) map[string]interface{} {
	return map[string]interface{}{"stream": a.Stream, "seq": a.Sequence, "duplicate": a.Duplicate}
}

func jsPublishDedupe() interface{} {
	nc := mustMain("js-dedupe")
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(5 * time.Second))
	check("jetstream", err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "MX", Subjects: []string{"mx.>"}, Storage: nats.FileStorage})
	check("add stream", err)
	var acks []map[string]interface{}
	for _, id := range []string{"a", "a", "b"} {
		a, err := js.Publish("mx.dedupe", []byte("msg "+id), nats.MsgId(id))
		check("publish "+id, err)
		acks = append(acks, ackObs(a))
	}
	si, err := js.StreamInfo("MX")
	check("stream info", err)
	return map[string]interface{}{"acks": acks, "state": stateObs(si.State), "config": si.Config}
}

// stateObs is a stream's state without its times.
func stateObs(st nats.StreamState) map[string]interface{} {
	return map[string]interface{}{"msgs": st.Msgs, "bytes": st.Bytes, "first_seq": st.FirstSeq,
		"last_seq": st.LastSeq, "consumers": st.Consumers, "num_deleted": st.NumDeleted}
}

func msgObs(m *nats.Msg) map[string]interface{} {
	md, err := m.Metadata()
	check("metadata", err)
	return map[string]interface{}{"data": string(m.Data), "stream_seq": md.Sequence.Stream,
		"consumer_seq": md.Sequence.Consumer, "delivered": md.NumDelivered}
}

func consumerObs(ci *nats.ConsumerInfo) map[string]interface{} {
	return map[string]interface{}{
		"num_ack_pending": ci.NumAckPending, "num_pending": ci.NumPending,
		"num_redelivered": ci.NumRedelivered,
		"delivered":       []uint64{ci.Delivered.Consumer, ci.Delivered.Stream},
		"ack_floor":       []uint64{ci.AckFloor.Consumer, ci.AckFloor.Stream},
	}
}

func jsPullConsumer() interface{} {
	nc := mustMain("js-pull")
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(5 * time.Second))
	check("jetstream", err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "MXPULL", Subjects: []string{"mxpull.>"}, Storage: nats.FileStorage})
	check("add stream", err)
	for i := 1; i <= 4; i++ {
		_, err := js.Publish("mxpull.work", []byte(fmt.Sprintf("job%d", i)))
		check("publish", err)
	}
	sub, err := js.PullSubscribe("mxpull.work", "pull", nats.BindStream("MXPULL"),
		nats.AckExplicit(), nats.AckWait(time.Second), nats.MaxDeliver(5))
	check("pull subscribe", err)
	first, err := sub.Fetch(4, nats.MaxWait(3*time.Second))
	check("fetch 4", err)
	expect(len(first) == 4, "fetched %d of 4", len(first))
	var deliveries []map[string]interface{}
	for _, m := range first {
		deliveries = append(deliveries, msgObs(m))
	}
	check("ack job1", first[0].AckSync())
	check("ack job2", first[1].AckSync())
	check("nak job3", first[2].Nak())
	// job4 is left alone: it comes back once ack_wait (1s) has passed
	mid, err := js.ConsumerInfo("MXPULL", "pull")
	check("consumer info", err)
	midAckPending := mid.NumAckPending
	config := mid.Config
	for i := 0; i < 2; i++ {
		ms, err := sub.Fetch(1, nats.MaxWait(4*time.Second))
		check("fetch redelivery", err)
		expect(len(ms) == 1, "fetched %d redeliveries", len(ms))
		deliveries = append(deliveries, msgObs(ms[0]))
		check("ack redelivery", ms[0].AckSync())
	}
	ci, err := js.ConsumerInfo("MXPULL", "pull")
	check("consumer info", err)
	return map[string]interface{}{"deliveries": deliveries, "ack_pending_after_nak": midAckPending, "final": consumerObs(ci),
		"config": config}
}

func jsPushConsumer() interface{} {
	nc := mustMain("js-push")
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(5 * time.Second))
	check("jetstream", err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "MXPUSH", Subjects: []string{"mxpush.>"}, Storage: nats.FileStorage})
	check("add stream", err)
	for i := 1; i <= 3; i++ {
		_, err := js.Publish("mxpush.event", []byte(fmt.Sprintf("ev%d", i)))
		check("publish", err)
	}
	sub, err := js.SubscribeSync("mxpush.event", nats.BindStream("MXPUSH"), nats.Durable("push"),
		nats.DeliverSubject("deliver.mxpush.go"), nats.ManualAck(), nats.AckExplicit(),
		nats.AckWait(10*time.Second), nats.DeliverAll())
	check("subscribe", err)
	var got []*nats.Msg
	for i := 0; i < 3; i++ {
		m, err := sub.NextMsg(3 * time.Second)
		check("next", err)
		got = append(got, m)
	}
	var order []map[string]interface{}
	for _, m := range got {
		order = append(order, msgObs(m))
	}
	check("ack ev1", got[0].AckSync())
	check("nak ev2", got[1].Nak())
	check("ack ev3", got[2].AckSync())
	m, err := sub.NextMsg(4 * time.Second)
	check("redelivery", err)
	order = append(order, msgObs(m))
	check("ack redelivery", m.AckSync())
	_, err = sub.NextMsg(300 * time.Millisecond)
	extra := err == nil
	ci, err := js.ConsumerInfo("MXPUSH", "push")
	check("consumer info", err)
	return map[string]interface{}{"order": order, "extra_delivery": extra, "final": consumerObs(ci)}
}

func opName(op nats.KeyValueOp) string {
	switch op {
	case nats.KeyValuePut:
		return "PUT"
	case nats.KeyValueDelete:
		return "DEL"
	case nats.KeyValuePurge:
		return "PURGE"
	}
	return fmt.Sprint(int(op))
}

func entryObs(e nats.KeyValueEntry) []interface{} {
	return []interface{}{e.Key(), string(e.Value()), e.Revision(), opName(e.Operation())}
}

func kvFeature() interface{} {
	nc := mustMain("kv")
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(5 * time.Second))
	check("jetstream", err)
	kv, err := js.CreateKeyValue(&nats.KeyValueConfig{Bucket: "mxkv", History: 5})
	check("create bucket", err)
	w, err := kv.WatchAll()
	check("watch", err)
	defer w.Stop()
	// the watcher first signals the end of the (empty) initial values with nil
	select {
	case e := <-w.Updates():
		expect(e == nil, "initial watch entry %v", e)
	case <-time.After(3 * time.Second):
		panic(failure{"no initial nil from watcher"})
	}
	var watched [][]interface{}
	watchUntil := func(n int) {
		for len(watched) < n {
			select {
			case e := <-w.Updates():
				if e != nil {
					watched = append(watched, entryObs(e))
				}
			case <-time.After(3 * time.Second):
				panic(failure{fmt.Sprintf("watcher saw %d of %d updates: %v", len(watched), n, watched)})
			}
		}
	}
	res := map[string]interface{}{}
	r1, err := kv.Put("color", []byte("red"))
	check("put", err)
	e, err := kv.Get("color")
	check("get", err)
	res["get"] = entryObs(e)
	r2, err := kv.Update("color", []byte("blue"), r1)
	check("update", err)
	_, err = kv.Update("color", []byte("green"), r1)
	res["stale_update"] = errKind(err)
	_, err = kv.Create("color", []byte("green"))
	res["create_existing"] = errKind(err)
	r3, err := kv.Put("size", []byte("large"))
	check("put size", err)
	check("delete", kv.Delete("color"))
	_, err = kv.Get("color")
	res["get_deleted"] = errKind(err)
	old, err := kv.GetRevision("color", 1)
	check("get revision 1", err)
	res["get_revision_1"] = entryObs(old)
	_, err = kv.Put("shape", []byte("round"))
	check("put shape", err)
	// the purge removes "round" from the stream: let the watcher see it first
	watchUntil(5)
	check("purge", kv.Purge("shape"))
	_, err = kv.Get("shape")
	res["get_purged"] = errKind(err)
	// Create succeeds on a key whose last operation is a purge (the client retries with
	// the purge marker's revision after the server refuses the first attempt)
	rc, err := kv.Create("shape", []byte("square"))
	check("create after purge", err)
	res["create_after_purge"] = rc
	res["revisions"] = []uint64{r1, r2, r3}
	keys, err := kv.Keys()
	check("keys", err)
	sort.Strings(keys)
	res["keys"] = keys
	hist, err := kv.History("color")
	check("history", err)
	var h [][]interface{}
	for _, e := range hist {
		h = append(h, entryObs(e))
	}
	res["history"] = h
	watchUntil(7)
	res["watch"] = watched
	st, err := kv.Status()
	check("status", err)
	res["status"] = map[string]interface{}{"values": st.Values(), "history": st.History(), "bucket": st.Bucket(),
		"bytes": st.Bytes(), "backing": st.BackingStore()}
	return res
}

func objectStore() interface{} {
	nc := mustMain("obj")
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(5 * time.Second))
	check("jetstream", err)
	store, err := js.CreateObjectStore(&nats.ObjectStoreConfig{Bucket: "mxobj"})
	check("create bucket", err)
	data := make([]byte, 1536*1024+123)
	for i := range data {
		data[i] = byte((i*7 + i/1000) % 251)
	}
	info, err := store.PutBytes("big.bin", data)
	check("put", err)
	_, err = store.PutString("small.txt", "tiny object")
	check("put small", err)
	back, err := store.GetBytes("big.bin")
	check("get", err)
	gi, err := store.GetInfo("big.bin")
	check("info", err)
	list, err := store.List()
	check("list", err)
	var names []string
	for _, o := range list {
		names = append(names, fmt.Sprintf("%s:%d", o.Name, o.Size))
	}
	sort.Strings(names)
	check("delete", store.Delete("big.bin"))
	_, err = store.GetInfo("big.bin")
	afterDelete := errKind(err)
	_, err = store.GetBytes("big.bin")
	getDeleted := errKind(err)
	list, err = store.List()
	check("list after delete", err)
	var left []string
	for _, o := range list {
		left = append(left, o.Name)
	}
	sort.Strings(left)
	expect(bytes.Equal(back, data), "object came back different (%d bytes)", len(back))
	sum := sha256.Sum256(data)
	want := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	expect(info.Digest == want && gi.Digest == want, "digest %s / %s, want %s", info.Digest, gi.Digest, want)
	return map[string]interface{}{
		"put":          map[string]interface{}{"size": info.Size, "chunks": info.Chunks, "digest": info.Digest},
		"info":         map[string]interface{}{"size": gi.Size, "chunks": gi.Chunks, "digest": gi.Digest, "deleted": gi.Deleted},
		"get":          map[string]interface{}{"size": len(back), "sha256": sha(back), "same": bytes.Equal(back, data)},
		"list":         names,
		"info_deleted": afterDelete,
		"get_deleted":  getDeleted,
		"list_after":   left,
	}
}

func websocketFeature() interface{} {
	ws, err := nats.Connect(env("MATRIX_WS_URL"), append(base("ws"), nats.UserInfo(env("MATRIX_USER"), env("MATRIX_PASSWORD")))...)
	check("connect ws", err)
	defer ws.Close()
	got := roundTrip(ws, "core.ws.echo", []byte("over websocket"))
	tcp := mustMain("ws-tcp")
	defer tcp.Close()
	// websocket -> tcp
	tsub, err := tcp.SubscribeSync("core.ws.to_tcp")
	check("tcp subscribe", err)
	check("tcp flush", tcp.Flush())
	check("ws publish", ws.Publish("core.ws.to_tcp", []byte("from ws")))
	check("ws flush", ws.Flush())
	m1, err := tsub.NextMsg(3 * time.Second)
	check("tcp receive", err)
	// tcp -> websocket, with headers
	wsub, err := ws.SubscribeSync("core.ws.to_ws")
	check("ws subscribe", err)
	check("ws flush", ws.Flush())
	hm := nats.NewMsg("core.ws.to_ws")
	hm.Header.Set("X-Via", "tcp")
	hm.Data = bytes.Repeat([]byte("w"), 70000)
	check("tcp publish", tcp.PublishMsg(hm))
	check("tcp flush", tcp.Flush())
	m2, err := wsub.NextMsg(3 * time.Second)
	check("ws receive", err)
	// a client that offers permessage-deflate (the server's websocket block does not enable
	// compression, so the server may decline; the connection must work either way)
	wz, err := nats.Connect(env("MATRIX_WS_URL"), append(base("ws-deflate"), nats.Compression(true),
		nats.UserInfo(env("MATRIX_USER"), env("MATRIX_PASSWORD")))...)
	check("connect ws with compression", err)
	defer wz.Close()
	big := bytes.Repeat([]byte("compressible "), 10000)
	gotz := roundTrip(wz, "core.ws.deflate", big)
	return map[string]interface{}{
		"deflate_roundtrip": map[string]interface{}{"size": len(gotz), "same": bytes.Equal(gotz, big)},
		"roundtrip":         string(got), "ws_to_tcp": string(m1.Data),
		"tcp_to_ws": map[string]interface{}{"size": len(m2.Data), "x_via": m2.Header.Get("X-Via")},
	}
}

// ---------------------------------------------------------------------------

func main() {
	go readStdin()
	feature("connect_user", 5*time.Second, connectUser)
	feature("connect_token", 5*time.Second, connectToken)
	feature("connect_nkey", 5*time.Second, connectNkey)
	feature("connect_creds", 5*time.Second, connectCreds)
	feature("tls", 5*time.Second, tlsFeature)
	feature("pubsub_wildcard", 5*time.Second, pubsubWildcard)
	feature("queue_group", 5*time.Second, queueGroup)
	feature("request_reply_headers", 5*time.Second, requestReplyHeaders)
	feature("no_responders", 5*time.Second, noResponders)
	feature("drain", 5*time.Second, drainFeature)
	feature("websocket", 5*time.Second, websocketFeature)
	feature("js_publish_dedupe", 5*time.Second, jsPublishDedupe)
	feature("js_pull_consumer", 10*time.Second, jsPullConsumer)
	feature("js_push_consumer", 8*time.Second, jsPushConsumer)
	feature("kv", 8*time.Second, kvFeature)
	feature("object_store", 10*time.Second, objectStore)
	feature("reconnect_restart", 25*time.Second, func() interface{} { return reconnect("restart") })
	feature("reconnect_lameduck", 25*time.Second, func() interface{} { return reconnect("lameduck") })
	logf("all features in %v", time.Since(programStart).Round(time.Millisecond))
}
