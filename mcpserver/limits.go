package mcpserver

import (
	"container/list"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter is a listener that holds at most max connections. At the
// cap a new connection does not wait (as with netutil.LimitListener, where
// idle junk connections would lock a valid client out until they time
// out): the oldest connection that has not yet sent a valid token is
// closed to make room, and only when every open connection is
// authenticated is the new one closed instead. A valid client's
// connection is the newest, so junk arriving before it goes first.
type connLimiter struct {
	net.Listener
	max int
	log *slog.Logger

	mu    sync.Mutex
	conns list.List // *trackedConn, oldest first
	// Evicted and Refused count connections closed at the cap (for
	// tests and logs).
	evicted, refused atomic.Int64
}

func newConnLimiter(ln net.Listener, max int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, log: log}
}

// trackedConn is one accepted connection; authed is set once a request
// on it carried the valid token.
type trackedConn struct {
	net.Conn
	l      *connLimiter
	elem   *list.Element // nil once closed
	authed atomic.Bool
}

// Accept returns the next connection, making room at the cap.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		l.mu.Lock()
		var victim *trackedConn
		if l.conns.Len() >= l.max {
			for e := l.conns.Front(); e != nil; e = e.Next() {
				if x := e.Value.(*trackedConn); !x.authed.Load() {
					victim = x
					break
				}
			}
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				l.log.Debug("connection refused: every connection is authenticated", "maxConnections", l.max)
				_ = c.Close()
				continue
			}
			l.conns.Remove(victim.elem)
			victim.elem = nil
		}
		tc.elem = l.conns.PushBack(tc)
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			_ = victim.Conn.Close()
		}
		return tc, nil
	}
}

// Close closes the connection and frees its slot.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.conns.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// open is the number of connections held.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns.Len()
}

// sessionGrace is how long a session id stays listed while the SDK does
// not (yet) know it: a session being created by a concurrent request.
const sessionGrace = 10 * time.Second

// sessionLRU orders MCP session ids by last use, to close the least
// recently used beyond max.
type sessionLRU struct {
	max int
	now func() time.Time

	mu    sync.Mutex
	order list.List // *sessionUse, most recent first
	index map[string]*list.Element
}

type sessionUse struct {
	id   string
	used time.Time
}

func newSessionLRU(max int) *sessionLRU {
	return &sessionLRU{max: max, now: time.Now, index: map[string]*list.Element{}}
}

// touch marks id used now; an unknown id is ignored.
func (l *sessionLRU) touch(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.index[id]; ok {
		e.Value.(*sessionUse).used = l.now()
		l.order.MoveToFront(e)
	}
}

// add lists a new session id and returns the ids to close: the least
// recently used live sessions beyond max. Ids that live reports ended
// (an idle timeout, a DELETE, a failed initialize) and that were not used
// within sessionGrace are dropped first, without being closed or counted.
func (l *sessionLRU) add(id string, live func(string) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for e := l.order.Front(); e != nil; {
		next := e.Next()
		if u := e.Value.(*sessionUse); !live(u.id) && now.Sub(u.used) > sessionGrace {
			l.order.Remove(e)
			delete(l.index, u.id)
		}
		e = next
	}
	if e, ok := l.index[id]; ok {
		l.order.Remove(e)
	}
	l.index[id] = l.order.PushFront(&sessionUse{id: id, used: now})
	var out []string
	for l.order.Len() > l.max {
		e := l.order.Back()
		u := e.Value.(*sessionUse)
		l.order.Remove(e)
		delete(l.index, u.id)
		out = append(out, u.id)
	}
	return out
}

// len is the number of sessions listed.
func (l *sessionLRU) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.order.Len()
}
