-- Each template's latest Meta category as last recorded (the Message
-- Templates API, the template_category_update webhook): what a run routes
-- its Cloud API sends by.
SELECT c.template_name, c.template_language, c.category
  FROM engagement_template_categories c;
