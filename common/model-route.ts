import { z } from 'zod';
import { MAX_MODEL_ID_LENGTH } from './model-id.js';
import { conditionSchema } from './resource.js';

/**
 * The ModelRoute resource: one public model name mapped onto models of one pool (a
 * MultiplexedDeployment in the same namespace) — a weighted split (canary, sticky, shadow), an
 * ensemble or a sequence. One object per route, not a list inside the pool, so thousands of
 * routes never meet etcd's object size limit (ADR 0034). This is the one definition: the CRD in
 * crds/ is generated from it, the operator and router parse with it, local mode reads the same
 * objects from a file.
 */

export const ROUTE_KIND = 'ModelRoute';
export const ROUTE_PLURAL = 'modelroutes';
export const ROUTE_SHORT_NAME = 'mroute';

/** Bounds of one route: backends of a split, members of an ensemble, steps of a sequence. */
export const ROUTE_LIMITS = { backends: 16, members: 16, steps: 16, outputs: 16, inputs: 64, weight: 1_000_000, deadlineMs: 600_000 } as const;
/** Routes a request may pass through (route of routes) before it is refused as too deep. */
export const MAX_ROUTE_DEPTH = 8;

/**
 * A model id (or `id@v`) of the pool, or another route's public name. The same characters as
 * common/model-id.ts; the `..` rule is CEL because the API server's regexes have no lookahead.
 */
export const routeModelSchema = z
  .string()
  .min(1)
  .max(MAX_MODEL_ID_LENGTH)
  .regex(/^[A-Za-z0-9._~@:+=-]+$/, 'may hold only letters, digits and . _ ~ @ : + = -')
  .refine((s) => !s.includes('..'), 'may not contain ".."')
  .meta({ 'x-kubernetes-validations': [{ rule: "!self.contains('..')", message: 'may not contain ".."' }] });

/** A tensor name, as a V2 request names its inputs and outputs. */
const tensorNameSchema = z.string().min(1).max(256);

export const splitBackendSchema = z
  .object({
    model: routeModelSchema,
    /** Relative share of requests, as Gateway API's backendRefs weight; 0 keeps a backend listed but idle. */
    weight: z.number().int().min(0).max(ROUTE_LIMITS.weight).default(1),
  })
  .strict();

export const mirrorSchema = z
  .object({
    model: routeModelSchema,
    /** Share of the route's requests copied to the mirror; its answers are only measured. */
    percent: z.number().min(0).max(100),
  })
  .strict();

export const splitSchema = z
  .object({
    backends: z.array(splitBackendSchema).min(1).max(ROUTE_LIMITS.backends),
    /** Requests carrying the same value of this header go to the same backend (lower-case header name). */
    stickyHeader: z
      .string()
      .regex(/^[a-z0-9!#$%&'*+.^_`|~-]+$/, 'must be a lower-case HTTP header name')
      .max(128)
      .optional(),
    mirror: mirrorSchema.optional(),
  })
  .strict()
  .refine((s) => s.backends.some((b) => b.weight > 0), { message: 'backend weights must sum to more than 0', path: ['backends'] })
  // Weights are non-negative, so "sum > 0" is "some weight > 0"; defaults apply before CEL runs.
  .meta({ 'x-kubernetes-validations': [{ rule: 'self.backends.exists(b, !has(b.weight) || b.weight > 0)', message: 'backend weights must sum to more than 0' }] });

export const ENSEMBLE_COMBINERS = ['mean', 'median', 'vote', 'first'] as const;
export type EnsembleCombiner = (typeof ENSEMBLE_COMBINERS)[number];

export const ensembleSchema = z
  .object({
    members: z
      .array(z.object({ model: routeModelSchema }).strict())
      .min(2)
      .max(ROUTE_LIMITS.members),
    combine: z.enum(ENSEMBLE_COMBINERS),
    /** Output names combined (vote: the class output); all outputs when absent. */
    outputs: z.array(tensorNameSchema).min(1).max(ROUTE_LIMITS.outputs).optional(),
    /** Members that must answer; all members when absent (first: 1). */
    quorum: z.number().int().min(1).max(ROUTE_LIMITS.members).optional(),
    deadlineMs: z.number().int().min(1).max(ROUTE_LIMITS.deadlineMs).optional(),
  })
  .strict()
  .refine((e) => e.quorum === undefined || e.quorum <= e.members.length, { message: 'quorum must not exceed the number of members', path: ['quorum'] })
  .meta({ 'x-kubernetes-validations': [{ rule: '!has(self.quorum) || self.quorum <= size(self.members)', message: 'quorum must not exceed the number of members' }] });

export const sequenceStepSchema = z
  .object({
    model: routeModelSchema,
    /** This step's input name ← the previous step's output name; unmapped inputs pass by the same name. */
    inputs: z.record(tensorNameSchema, tensorNameSchema).optional(),
  })
  .strict();

export const sequenceSchema = z.object({ steps: z.array(sequenceStepSchema).min(2).max(ROUTE_LIMITS.steps) }).strict();

const k8sName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a Kubernetes object name')
  .max(253);

export const modelRouteSpecSchema = z
  .object({
    /** The MultiplexedDeployment (pool) in the route's namespace whose models it routes to. */
    deploymentRef: z.object({ name: k8sName }).strict(),
    /** Public model name requests use; the route's metadata.name when absent. */
    model: routeModelSchema.optional(),
    split: splitSchema.optional(),
    ensemble: ensembleSchema.optional(),
    sequence: sequenceSchema.optional(),
  })
  .strict()
  .refine((s) => [s.split, s.ensemble, s.sequence].filter((k) => k !== undefined).length === 1, {
    message: 'exactly one of split, ensemble or sequence must be set',
  })
  .meta({
    'x-kubernetes-validations': [
      {
        rule: '(has(self.split) ? 1 : 0) + (has(self.ensemble) ? 1 : 0) + (has(self.sequence) ? 1 : 0) == 1',
        message: 'exactly one of split, ensemble or sequence must be set',
      },
    ],
  });

export type ModelRouteSpec = z.infer<typeof modelRouteSpecSchema>;
export type ModelRouteSpecInput = z.input<typeof modelRouteSpecSchema>;
export type SplitSpec = z.infer<typeof splitSchema>;
export type SplitBackend = z.infer<typeof splitBackendSchema>;
export type MirrorSpec = z.infer<typeof mirrorSchema>;
export type EnsembleSpec = z.infer<typeof ensembleSchema>;
export type SequenceSpec = z.infer<typeof sequenceSchema>;
export type SequenceStep = z.infer<typeof sequenceStepSchema>;

export const ROUTE_CONDITION_TYPES = ['Accepted', 'ResolvedRefs'] as const;

/**
 * Why a condition is False. Accepted: Invalid (the spec fails the schema: only possible when
 * admission was bypassed), NameConflict (an older route of the pool holds the public name).
 * ResolvedRefs: PoolNotFound, RefCycle (routes that refer to each other), DepthExceeded.
 */
export const ROUTE_REASONS = {
  accepted: 'Accepted',
  invalid: 'Invalid',
  nameConflict: 'NameConflict',
  resolved: 'ResolvedRefs',
  poolNotFound: 'PoolNotFound',
  refCycle: 'RefCycle',
  depthExceeded: 'DepthExceeded',
} as const;

export const routeConditionSchema = conditionSchema.extend({ type: z.enum(ROUTE_CONDITION_TYPES) });

export const ROUTE_KINDS = ['split', 'ensemble', 'sequence'] as const;
export type RouteKind = (typeof ROUTE_KINDS)[number];

export const modelRouteStatusSchema = z.object({
  observedGeneration: z.number().int().optional(),
  /** split, ensemble or sequence: the Kind printer column. */
  kind: z.enum(ROUTE_KINDS).optional(),
  /** The models the route sends to with their shares (routeSummary): the Backends printer column. */
  backends: z.string().optional(),
  conditions: z.array(routeConditionSchema).optional(),
});

export type RouteCondition = z.infer<typeof routeConditionSchema>;
export type ModelRouteStatus = z.infer<typeof modelRouteStatusSchema>;

export interface ModelRouteMetadata {
  name: string;
  namespace?: string | undefined;
  uid?: string | undefined;
  generation?: number | undefined;
  resourceVersion?: string | undefined;
  creationTimestamp?: string | undefined;
}

/** A parsed ModelRoute: the spec has its defaults applied. */
export interface ModelRoute {
  apiVersion: string;
  kind: typeof ROUTE_KIND;
  metadata: ModelRouteMetadata;
  spec: ModelRouteSpec;
  status?: ModelRouteStatus | undefined;
}

export function routeKind(spec: ModelRouteSpec): RouteKind {
  if (spec.split !== undefined) return 'split';
  return spec.ensemble !== undefined ? 'ensemble' : 'sequence';
}

/** The name requests use to reach the route. */
export function publicName(route: Pick<ModelRoute, 'metadata' | 'spec'>): string {
  return route.spec.model ?? route.metadata.name;
}

/** Every model name the route sends to (mirror included): the edges of the route graph. */
export function routeTargets(spec: ModelRouteSpec): string[] {
  if (spec.split !== undefined) {
    const targets = spec.split.backends.map((b) => b.model);
    if (spec.split.mirror !== undefined) targets.push(spec.split.mirror.model);
    return targets;
  }
  if (spec.ensemble !== undefined) return spec.ensemble.members.map((m) => m.model);
  return spec.sequence?.steps.map((s) => s.model) ?? [];
}

/** `a 90%, b 10%` for a split (its mirror last), `mean(a, b, c)` for an ensemble, `a → b` for a sequence. */
export function routeSummary(spec: ModelRouteSpec): string {
  if (spec.split !== undefined) {
    const total = spec.split.backends.reduce((sum, b) => sum + b.weight, 0);
    const parts = spec.split.backends.map((b) => `${b.model} ${Math.round((b.weight / total) * 1000) / 10}%`);
    if (spec.split.mirror !== undefined) parts.push(`mirror ${spec.split.mirror.model} ${spec.split.mirror.percent}%`);
    return parts.join(', ');
  }
  if (spec.ensemble !== undefined) return `${spec.ensemble.combine}(${spec.ensemble.members.map((m) => m.model).join(', ')})`;
  return spec.sequence?.steps.map((s) => s.model).join(' → ') ?? '';
}

const metadataSchema = z.object({
  name: k8sName,
  namespace: z.string().optional(),
  uid: z.string().optional(),
  generation: z.number().int().optional(),
  resourceVersion: z.string().optional(),
  creationTimestamp: z.union([z.string(), z.date().transform((d) => d.toISOString())]).optional(),
});

const modelRouteObjectSchema = z.object({
  apiVersion: z.string(),
  kind: z.literal(ROUTE_KIND),
  metadata: metadataSchema,
  spec: modelRouteSpecSchema,
  // Written by the operator, never read to route: a status this version does not know must not
  // make its route unserved.
  status: modelRouteStatusSchema.optional().catch(undefined),
});

export type ModelRouteParse = { ok: true; route: ModelRoute } | { ok: false; name: string; message: string };

/** Parses one object as the API server or a routes file gives it; the message names the first problem's path. */
export function parseModelRoute(raw: unknown): ModelRouteParse {
  const r = modelRouteObjectSchema.safeParse(raw);
  if (r.success) {
    return { ok: true, route: r.data };
  }
  const issue = r.error.issues[0];
  const where = issue === undefined || issue.path.length === 0 ? '' : `${issue.path.join('.')}: `;
  const given = typeof raw === 'object' && raw !== null ? (raw as { metadata?: { name?: unknown } }).metadata?.name : undefined;
  // A routes file may give a number or a boolean where a name belongs: the message names it as written.
  const name = typeof given === 'string' || typeof given === 'number' || typeof given === 'boolean' ? String(given) : '';
  return { ok: false, name, message: `${where}${issue?.message ?? 'invalid ModelRoute'}` };
}
