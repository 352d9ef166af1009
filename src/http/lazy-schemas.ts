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
export function lazyValidator(compile: () => ValidateFunction): FastifyValidationResult {
  let compiled: ValidateFunction | undefined;
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

/** Fastify's own serializer factory (fast-json-stringify), each route's serializer made on first use. */
export const lazySerializerFactory: SerializerFactory = (externalSchemas, options) => {
  const build = SerializerSelector()(externalSchemas, options);
  return (routeDef) => {
    let serialize: ((doc: unknown) => string) | undefined;
    return (doc: unknown) => {
      serialize ??= build(routeDef);
      return serialize(doc);
    };
  };
};
