/**
 * The shared security suite over /v1/ip-pools and /v1/warmup-policies: no token, bad tokens,
 * deleted key, a key without the scope (403), another tenant's pool or policy (404).
 */
import { defineSecuritySuite } from '../helpers/security-suite.ts';
import { IP_POOL_ROUTES, WARMUP_ROUTES } from './routes.ts';

defineSecuritySuite([...IP_POOL_ROUTES, ...WARMUP_ROUTES]);
