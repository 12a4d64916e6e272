import type { Random } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import { RouteIndex, type RouteResolution } from '../../common/route-index.js';
import type { MirrorSpec, SplitSpec } from '../../common/model-route.js';
import { rawHeaderValue } from './route-rewrite.js';
import { mirrored, stickyBackend, weightedBackend } from './route-split.js';

/**
 * The ModelRoutes of one pool as a route prefix serves them: the index (public name → route)
 * and the router's random source for weighted choices and mirror sampling.
 */
export class ModelRouting {
  constructor(
    readonly index: RouteIndex,
    private readonly random: Random,
  ) {}

  static empty(random: Random): ModelRouting {
    return new ModelRouting(RouteIndex.EMPTY, random);
  }

  /** Whether `model` is a route's public name: the one lookup a request for a plain model pays. */
  has(model: string): boolean {
    return this.index.get(model) !== undefined;
  }

  /**
   * Follows `model` through split routes to a model id (or the ensemble or sequence serving
   * it): by weight, or by the sticky header's value in `rawHeaders` when the split names one
   * and the request carries it. A route in a cycle or too deep a chain is the request's
   * `route_cycle` error, for HTTP and gRPC alike.
   */
  resolve(model: string, rawHeaders: readonly string[]): Exclude<RouteResolution, { kind: 'refused' }> {
    const r = this.index.resolve(model, (split: SplitSpec) => {
      const key = split.stickyHeader === undefined ? undefined : rawHeaderValue(rawHeaders, split.stickyHeader);
      return key === undefined ? weightedBackend(split.backends, this.random()) : stickyBackend(split.backends, key);
    });
    if (r.kind === 'refused') throw new ModelmuxError('route_cycle', `model ${model} is a ModelRoute that cannot serve: ${r.problem.message}`);
    return r;
  }

  /** The mirrors of a resolution this request is copied to, each by its percentage. */
  sampleMirrors(mirrors: readonly MirrorSpec[]): MirrorSpec[] {
    return mirrors.filter((m) => mirrored(m.percent, this.random()));
  }
}
