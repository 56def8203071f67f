#!/usr/bin/env bash
# Regenerate the remote-write protobuf modules kept in the package
# (falcon_gpu/sinks/remote_write/proto/*_pb2.py) from the .proto files beside them.
# Needs grpcio-tools (pip install -e '.[test]'). Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/../falcon_gpu/sinks/remote_write/proto"
python -m grpc_tools.protoc -I. --python_out=. remote_v1.proto remote_v2.proto
echo "regenerated: $(ls ./*_pb2.py | tr '\n' ' ')"
