# frozen_string_literal: true

# The test app (cli_app.rb) and the tasks test/metrics_test.rb counts.
require_relative "cli_app"
require_relative "metrics_tasks"
