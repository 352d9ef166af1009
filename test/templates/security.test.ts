/**
 * The shared security suite over /v1/templates: no token, bad tokens, deleted key, a key without
 * manage:templates (403), another tenant's template (404).
 */
import { defineSecuritySuite } from '../helpers/security-suite.ts';
import { TEMPLATE_ROUTES } from './routes.ts';

defineSecuritySuite(TEMPLATE_ROUTES);
