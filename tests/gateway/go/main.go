// A Go client of the kgstream gateway, for the cross-language test
// (tests/gateway/test_go_client.py). Its stubs are generated from protos/ with
// protoc-gen-go and protoc-gen-go-grpc and no M flags (tests/gateway/go/build). It calls
// Query, QueryStream (to EOF), Retrieve and GetSubgraph, then asks the v1 reflection
// service (grpc-go's own client) for the services and QueryRequest's file, and prints one
// JSON object:
//
//	{"query": QueryResponse, "stream": [QueryEvent, ...], "retrieve": RetrievalResult,
//	 "subgraph": GetSubgraphResponse,
//	 "reflection": {"services": [...], "top_k_comment": "..."}}
//
// with the messages in protojson with proto field names and default values (int64 as
// strings, enums by name), or {"error": {"code": ..., "details": ...}} with exit code 1.
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
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
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

func run(conn *grpc.ClientConn, request *kgstreamv1.QueryRequest,
	subgraphRequest *kgstreamv1.GetSubgraphRequest) (map[string]any, error) {
	client := kgstreamv1.NewKnowledgeGraphClient(conn)
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
	reflected, err := reflect(ctx, reflectionv1.NewServerReflectionClient(conn))
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"query":      asJSON(query),
		"stream":     events,
		"retrieve":   asJSON(retrieve),
		"subgraph":   asJSON(subgraph),
		"reflection": reflected,
	}, nil
}

// reflect asks the v1 reflection service for the services and for the file holding
// QueryRequest, and returns the services and the comment of QueryRequest.top_k.
func reflect(ctx context.Context, client reflectionv1.ServerReflectionClient) (map[string]any, error) {
	stream, err := client.ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer stream.CloseSend()
	ask := func(request *reflectionv1.ServerReflectionRequest) (*reflectionv1.ServerReflectionResponse, error) {
		if err := stream.Send(request); err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	listed, err := ask(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
	if err != nil {
		return nil, err
	}
	services := []string{}
	for _, service := range listed.GetListServicesResponse().GetService() {
		services = append(services, service.GetName())
	}
	found, err := ask(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{
			FileContainingSymbol: "kgstream.v1.QueryRequest"}})
	if err != nil {
		return nil, err
	}
	comment := ""
	for _, raw := range found.GetFileDescriptorResponse().GetFileDescriptorProto() {
		file := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(raw, file); err != nil {
			return nil, err
		}
		comment += fieldComment(file, "QueryRequest", "top_k")
	}
	return map[string]any{"services": services, "top_k_comment": comment}, nil
}

// fieldComment is the leading comment of message.field in file's source info ("" if none):
// the documentation comment, which grpcurl describe shows too.
func fieldComment(file *descriptorpb.FileDescriptorProto, message, field string) string {
	const messageTypes, fields = 4, 2 // FileDescriptorProto.message_type, DescriptorProto.field
	for m, described := range file.GetMessageType() {
		for f, candidate := range described.GetField() {
			if described.GetName() != message || candidate.GetName() != field {
				continue
			}
			for _, location := range file.GetSourceCodeInfo().GetLocation() {
				path := location.GetPath()
				if len(path) == 4 && path[0] == messageTypes && path[1] == int32(m) &&
					path[2] == fields && path[3] == int32(f) {
					return location.GetLeadingComments()
				}
			}
		}
	}
	return ""
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

	result, err := run(conn, request, subgraphRequest)
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
