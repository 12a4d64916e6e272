import { apiErrorMessage } from '../common/kube-api-errors.js';
import type { Logger } from '../common/log.js';
import { API_GROUP, API_VERSION, KIND } from '../common/names.js';
import type { MultiplexedDeployment } from '../common/resource.js';
import type { ObjectWriter } from './kube-writer.js';

/** Identical events for one object within this window are sent once: a failing reconcile retries often. */
const DEDUPE_WINDOW_MS = 5 * 60_000;
const COMPONENT = 'modelmux-operator';

/** Where a reconcile reports what `kubectl describe mxd` shows. */
export interface EventSink {
  record(mxd: MultiplexedDeployment, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
}

/** Records core/v1 Events on a MultiplexedDeployment. */
export class EventRecorder implements EventSink {
  private readonly lastSent = new Map<string, number>();

  constructor(
    private readonly writer: ObjectWriter,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async record(mxd: MultiplexedDeployment, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const dedupeKey = `${mxd.metadata.uid ?? ''}|${reason}|${message}`;
    const at = this.now();
    const last = this.lastSent.get(dedupeKey);
    if (last !== undefined && at - last < DEDUPE_WINDOW_MS) return;
    this.lastSent.set(dedupeKey, at);
    for (const [k, t] of this.lastSent) if (at - t >= DEDUPE_WINDOW_MS) this.lastSent.delete(k);
    const ns = mxd.metadata.namespace;
    const time = new Date(at).toISOString();
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${mxd.metadata.name}.${at.toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`, namespace: ns },
      involvedObject: { apiVersion: `${API_GROUP}/${API_VERSION}`, kind: KIND, name: mxd.metadata.name, namespace: ns, uid: mxd.metadata.uid },
      reason,
      message: message.slice(0, 1024),
      type,
      source: { component: COMPONENT },
      reportingComponent: COMPONENT,
      firstTimestamp: time,
      lastTimestamp: time,
      count: 1,
    };
    try {
      await this.writer.create(event);
    } catch (err) {
      // An event is a courtesy; failing to send one must not fail the reconcile.
      this.log.warn('could not record event', { reason, error: apiErrorMessage(err) });
    }
  }
}
