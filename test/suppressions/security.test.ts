/**
 * The shared security suite (no token, bad tokens, deleted key, wrong scope, other tenant's id)
 * over the suppressions routes, the multipart import included.
 */
import { defineSecuritySuite } from '../helpers/security-suite.ts';
import { SUPPRESSION_IMPORT_ROUTE, SUPPRESSION_ROUTES } from './routes.ts';

defineSecuritySuite([...SUPPRESSION_ROUTES, SUPPRESSION_IMPORT_ROUTE]);
