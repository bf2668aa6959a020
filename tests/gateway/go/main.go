// A Go client of the kgstream gateway, for the cross-language test
// (tests/gateway/test_go_client.py). Its stubs are generated from protos/ with
// protoc-gen-go and protoc-gen-go-grpc and no M flags (tests/gateway/go/build). It calls
// Query, QueryStream (to EOF), Retrieve and GetSubgraph and prints one JSON object:
//
//	{"query": QueryResponse, "stream": [QueryEvent, ...], "retrieve": RetrievalResult,
//	 "subgraph": GetSubgraphResponse}
//
// in protojson with proto field names and default values (int64 as strings, enums by
// name), or {"error": {"code": ..., "details": ...}} with exit code 1.
//
// Usage: client HOST:PORT REQUEST_JSON SUBGRAPH_REQUEST_JSON
//
//	REQUEST_JSON is a kgstream.v1.QueryRequest, SUBGRAPH_REQUEST_JSON a
//	kgstream.v1.GetSubgraphRequest, both in protojson.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	kgstreamv1 "github.com/kgstream/kgstream/gen/go/kgstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var printer = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

func asJSON(message proto.Message) json.RawMessage {
	out, err := printer.Marshal(message)
	if err != nil {
		panic(err) // a generated message always marshals
	}
	return out
}

func parse(text string, into proto.Message) {
	if err := protojson.Unmarshal([]byte(text), into); err != nil {
		fmt.Fprintf(os.Stderr, "client: bad request JSON %q: %v\n", text, err)
		os.Exit(2)
	}
}

func run(client kgstreamv1.KnowledgeGraphClient, request *kgstreamv1.QueryRequest,
	subgraphRequest *kgstreamv1.GetSubgraphRequest) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	query, err := client.Query(ctx, request)
	if err != nil {
		return nil, err
	}
	stream, err := client.QueryStream(ctx, request)
	if err != nil {
		return nil, err
	}
	events := []json.RawMessage{}
	for {
		event, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		events = append(events, asJSON(event))
	}
	retrieve, err := client.Retrieve(ctx, request)
	if err != nil {
		return nil, err
	}
	subgraph, err := client.GetSubgraph(ctx, subgraphRequest)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"query":    asJSON(query),
		"stream":   events,
		"retrieve": asJSON(retrieve),
		"subgraph": asJSON(subgraph),
	}, nil
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: client HOST:PORT REQUEST_JSON SUBGRAPH_REQUEST_JSON")
		os.Exit(2)
	}
	request := &kgstreamv1.QueryRequest{}
	parse(os.Args[2], request)
	subgraphRequest := &kgstreamv1.GetSubgraphRequest{}
	parse(os.Args[3], subgraphRequest)

	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		os.Exit(2)
	}
	defer conn.Close()

	result, err := run(kgstreamv1.NewKnowledgeGraphClient(conn), request, subgraphRequest)
	if err != nil {
		failure := status.Convert(err)
		result = map[string]any{
			"error": map[string]any{"code": failure.Code().String(), "details": failure.Message()},
		}
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}
