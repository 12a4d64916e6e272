import { Metadata, ServerInterceptingCall, status, type ServerInterceptor } from '@grpc/grpc-js';
import type { Clock } from '../common/clock.js';
import { ModelmuxError } from '../common/errors.js';
import { grpcError } from '../common/grpc/status.js';
import type { Deadlines, Expiring } from './deadlines.js';

/**
 * The body timeout of ADR 0026 on the gRPC port: a call's message must be in this long after its
 * headers, or the call ends DEADLINE_EXCEEDED (`request_timeout`) and its stream with it, so a
 * client that opens calls and sends their messages slowly, or not at all, holds neither memory
 * nor a stream for longer. grpc-js hands the router a unary call only once its message is
 * whole, so this is a server interceptor, timed by the router's shared deadline sweep (one Set
 * entry per call, no timer). The idle part of the body timeout has no counterpart here: grpc-js
 * tells nothing of a message's bytes before it is whole.
 */
export function messageTimeout(deadlines: Deadlines, clock: Clock, timeoutMs: number, onTimeout: () => void): ServerInterceptor {
  return (_method, call) => {
    const entry: Expiring = {
      deadlineAt: Number.POSITIVE_INFINITY,
      expire: () => {
        onTimeout();
        const err = grpcError(new ModelmuxError('request_timeout', `the call's message did not arrive within ${timeoutMs} ms`), new Metadata());
        call.sendStatus({ ...err, code: status.DEADLINE_EXCEEDED });
      },
    };
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            (entry as { deadlineAt: number }).deadlineAt = clock.now() + timeoutMs;
            deadlines.add(entry);
            pass(metadata);
          },
          onReceiveMessage: (message, pass) => {
            deadlines.remove(entry);
            pass(message);
          },
          onCancel: () => deadlines.remove(entry),
        }),
      sendStatus: (s, pass) => {
        deadlines.remove(entry);
        pass(s);
      },
    });
  };
}
