#!/bin/sh
# Regenerate the kubelet PodResources v1 stubs from falcon_gpu/attribution/podresources/api.proto.
# Needs grpcio-tools (the `test` extra). The generated files are committed so the
# agent never needs protoc at run time; run this after editing api.proto.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
pkg=falcon_gpu/attribution/podresources
cd "$root"
python -m grpc_tools.protoc -I "$pkg" --python_out="$pkg" --grpc_python_out="$pkg" "$pkg/api.proto"
# protoc writes `import api_pb2`; make it relative so the package imports it.
sed -i 's/^import api_pb2 as api__pb2$/from . import api_pb2 as api__pb2/' "$pkg/api_pb2_grpc.py"
echo "regenerated $pkg/api_pb2.py and api_pb2_grpc.py"
