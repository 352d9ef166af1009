import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyReply,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';

/**
 * The app as route modules see it: TypeBox schemas type each handler's body, query, params and
 * headers (and what it may answer), so handlers never cast request parts. Type-only: validation
 * stays with the app's own Ajv instances (see makeAjv in app.ts).
 */
export type TypedApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/**
 * A feature's routes: registered by buildApp from the list in src/modules/index.ts. `D` is what
 * the routes need (their services, config): each module names its own part of the container.
 */
export type RouteModule<D> = (app: TypedApp, deps: D) => void | Promise<void>;

/** 204 No Content. (A typed reply's send() would want the schema's `null`; nothing is sent.) */
export function noContent(reply: FastifyReply) {
  return reply.code(204).send();
}
