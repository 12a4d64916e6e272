import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';

export interface SendOptions {
  /** The request is a route's mirror copy (route-mirror.ts): it is not copied again nor counted as the route's. */
  mirror?: boolean;
}

/**
 * Sends a request through the router as a client's would go: classified, then placed, tried and
 * answered into `res` (dispatch.ts). Composites and mirrors are given one to send their member
 * requests and copies, so they never build an exchange themselves, and the exchange never builds
 * them: the dispatcher is the one place that knows every kind of request.
 */
export type RequestSender = (req: DownstreamRequest, res: DownstreamResponse, options?: SendOptions) => void;
