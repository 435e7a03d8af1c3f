"""The SageMaker stand-in's parts (the server and its command line: `local.sagemaker_standin`).

- `events`: the wire format of InvokeEndpointWithBidirectionalStream (AWS event stream), pure;
- `routing`: which container a request goes to, or the error SageMaker would answer, pure;
- `http2`: a minimal full-duplex HTTP/2 server (TLS, ALPN h2) running one ASGI app;
- `bridge`: one call bridged to one container WebSocket, frame by frame, with keepalive.
"""
