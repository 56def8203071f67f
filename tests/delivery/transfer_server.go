// A stand-in for Open-Falcon transfer's RPC port, built by the tests with the
// standard library only: Go's net/rpc over the jsonrpc codec, exactly the
// framing the real transfer speaks, and transfer's validation rules. Accepted
// items are appended as JSON lines to the file named by the second argument.
// An optional third argument (seconds) closes a connection idle that long, as
// a load balancer in front of transfer does.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/rpc"
	"net/rpc/jsonrpc"
	"os"
	"strconv"
	"sync"
	"time"
)

type MetricValue struct {
	Endpoint  string      `json:"endpoint"`
	Metric    string      `json:"metric"`
	Value     interface{} `json:"value"`
	Step      int64       `json:"step"`
	Type      string      `json:"counterType"`
	Tags      string      `json:"tags"`
	Timestamp int64       `json:"timestamp"`
}

type TransferResponse struct {
	Message string
	Total   int
	Invalid int
	Latency int64
}

type Transfer int

// NullRpcRequest and SimpleRpcResponse as in open-falcon/common/model: Ping's arguments.
type NullRpcRequest struct{}

type SimpleRpcResponse struct {
	Code int `json:"code"`
}

// Ping is transfer's no-op RPC (what falcon-gpu doctor calls).
func (t *Transfer) Ping(req NullRpcRequest, resp *SimpleRpcResponse) error {
	return nil
}

var (
	mu  sync.Mutex
	out *os.File
)

func (t *Transfer) Update(args []*MetricValue, reply *TransferResponse) error {
	mu.Lock()
	defer mu.Unlock()
	invalid := 0
	for _, v := range args {
		okType := v.Type == "GAUGE" || v.Type == "COUNTER" || v.Type == "DERIVE"
		if v.Metric == "" || v.Endpoint == "" || !okType || v.Step <= 0 || len(v.Metric)+len(v.Tags) > 510 {
			invalid++
			continue
		}
		line, _ := json.Marshal(v)
		out.Write(append(line, '\n'))
	}
	reply.Message = "ok"
	reply.Total = len(args)
	reply.Invalid = invalid
	return nil
}

// idleConn closes itself when no request arrives within idle.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c idleConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func main() {
	var err error
	out, err = os.OpenFile(os.Args[2], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	if err := rpc.Register(new(Transfer)); err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		panic(err)
	}
	var idle time.Duration
	if len(os.Args) > 3 {
		seconds, err := strconv.ParseFloat(os.Args[3], 64)
		if err != nil {
			panic(err)
		}
		idle = time.Duration(seconds * float64(time.Second))
	}
	fmt.Println("listening")
	for {
		conn, err := ln.Accept()
		if err != nil {
			continue
		}
		if idle > 0 {
			conn = idleConn{conn, idle}
		}
		go jsonrpc.ServeConn(conn)
	}
}
