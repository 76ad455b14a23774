# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      class NotFound < Page
        TITLE = "Not found"

        def status = 404
        def nav_path = nil

        def body
          tag(:p, ["Nothing at ", tag(:code, @params[:path]), ". ", link("/", "Back to the overview"), "."])
        end

        def to_h = {"error" => "not found"}
      end
    end
  end
end
