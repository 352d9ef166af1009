import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import type { ValidateFunction } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';

/**
 * Route schemas are compiled when a route first needs them, not at start-up. Fastify compiles
 * every route's request validators (ajv) and response serializers (fast-json-stringify) while the
 * app is built: with ~150 schemas that was most of the time `postyard start` took to answer
 * /readyz (bench/cli-start.ts), and a node that never sees a route never needs its code. What is
 * validated and serialized is unchanged: the same compilers with the same options, just later.
 * The price: a schema the compiler refuses fails that route's first request (a 500), not the
 * start; test/http covers every route's schemas.
 */
export function lazyValidator(
  compile: () => ValidateFunction,
  warmers?: SchemaWarmers,
  route?: string,
): FastifyValidationResult {
  let compiled: ValidateFunction | undefined;
  if (warmers && route)
    warmers.add(route, () => {
      compiled ??= compile();
    });
  const validate: FastifyValidationResult = (data: unknown) => {
    compiled ??= compile();
    // Our ajv instances compile no async schemas: the answer is a boolean.
    const result = compiled(data) as boolean;
    // Fastify reads the errors of a failed validation from the function it was given.
    validate.errors = compiled.errors;
    return result;
  };
  validate.errors = null;
  return validate;
}

/** What a validator compiler returns: a validate function whose `errors` Fastify reads. */
type FastifyValidationResult = ReturnType<FastifySchemaCompiler<unknown>>;

type SerializerFactory = ReturnType<typeof SerializerSelector>;

/**
 * The compile steps of each route's schemas, by `METHOD /url`, so that the few routes a node must
 * answer at full speed from its first request (the accept path) can be compiled before it
 * listens: compiling the transmissions schemas on the first request held that request and every
 * one queued behind it (bench/soak.ts, first window).
 */
export class SchemaWarmers {
  private readonly byRoute = new Map<string, (() => void)[]>();

  add(route: string, compile: () => void): void {
    const list = this.byRoute.get(route);
    if (list) list.push(compile);
    else this.byRoute.set(route, [compile]);
  }

  /** Compiles every schema of the named routes now; returns how many were compiled. */
  compile(routes: readonly string[]): number {
    let n = 0;
    for (const route of routes) {
      for (const compile of this.byRoute.get(route) ?? []) {
        compile();
        n++;
      }
    }
    return n;
  }
}

/** Fastify's own serializer factory (fast-json-stringify), each route's serializer made on first use. */
export function lazySerializerFactory(warmers?: SchemaWarmers): SerializerFactory {
  return (externalSchemas, options) => {
    const build = SerializerSelector()(externalSchemas, options);
    return (routeDef) => {
      let serialize: ((doc: unknown) => string) | undefined;
      warmers?.add(`${routeDef.method} ${routeDef.url}`, () => {
        serialize ??= build(routeDef);
      });
      return (doc: unknown) => {
        serialize ??= build(routeDef);
        return serialize(doc);
      };
    };
  };
}
