"""The stand-ins' parts (their servers and command lines: `local.sagemaker_standin`, `local.agentcore_standin`).

Both: `serving` (a TLS listener on a throwaway PKI, and the command's run until a signal, with its
ready line).

SageMaker's bidirectional streaming API:

- `events`: the wire format of InvokeEndpointWithBidirectionalStream (AWS event stream), pure;
  its `ErrorResponse` (status, `x-amzn-ErrorType`, JSON body) serves both stand-ins;
- `routing`: which container a request goes to, or the error SageMaker would answer, pure;
- `http2`: a minimal full-duplex HTTP/2 server (TLS, ALPN h2) running one ASGI app;
- `bridge`: one call bridged to one container WebSocket, frame by frame, with keepalive.

AgentCore Runtime's data plane:

- `agentcore_auth`: SigV4 verified with botocore's signer, the test principals and their IAM, pure;
- `agentcore_routing`: the runtime, session and forwarded headers of a call, or its refusal, pure;
- `agentcore_frames`: the WebSocket limits (frame size, frame rate, idle timeout) and close codes, pure.
"""
